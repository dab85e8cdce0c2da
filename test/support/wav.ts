/** PCM WAV audio (16 kHz, 16-bit, mono: 32,000 bytes a second) for the transcription tests and bench:upload. */

/** The 44-byte header of such a file whose audio is `data` bytes. */
export function wavHeader(data: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + data, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(16_000, 24);
  h.writeUInt32LE(32_000, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(data, 40);
  return h;
}

/** A whole file of `seconds` of silence. */
export function wavOf(seconds: number): Buffer {
  const data = Math.round(seconds * 32_000);
  return Buffer.concat([wavHeader(data), Buffer.alloc(data)]);
}
