/**
 * How long an uploaded audio file may play, at most, from its size, its type and its first bytes: what bounds a
 * transcription before it is admitted (docs/modalities.md, "Transcription"). A WAV file's header says its duration
 * (its data chunk's size over its byte rate), a FLAC file's STREAMINFO its samples and rate; any other file is taken
 * at the lowest bitrate its format allows, so that no file of that size plays longer.
 */
import type { FormFile } from './protocol.js';

/**
 * The lowest bitrate, in bits a second, of each container Nexus knows, for a file whose header does not say its
 * duration: MP3's lowest (MPEG-2.5 layer III, 8 kbit/s); Opus's (6 kbit/s) for Ogg and WebM; AAC's, for MP4 and
 * M4A, taken at Opus's; a FLAC without its samples at 1 kbit/s (a silent FLAC frame takes a few bytes); PCM's
 * lowest (8 kHz, 8-bit, mono) for a WAV whose header is not read; any other file at 1 kbit/s.
 */
export const LOWEST_BITRATE = { mp3: 8_000, ogg: 6_000, webm: 6_000, mp4: 6_000, flac: 1_000, wav: 64_000, other: 1_000 } as const;

type AudioFormat = keyof typeof LOWEST_BITRATE;

/** The container of a file, by its first bytes, else its type or its name's extension. */
function audioFormatOf(file: Pick<FormFile, 'head' | 'contentType' | 'filename'>): AudioFormat {
  const h = file.head;
  const ascii = (from: number, to: number) => h.subarray(from, to).toString('latin1');
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WAVE') return 'wav';
  if (ascii(0, 4) === 'fLaC') return 'flac';
  if (ascii(0, 4) === 'OggS') return 'ogg';
  if (h.length >= 4 && h.readUInt32BE(0) === 0x1a45dfa3) return 'webm';
  if (ascii(4, 8) === 'ftyp') return 'mp4';
  if (ascii(0, 3) === 'ID3' || (h.length >= 2 && h[0] === 0xff && (h[1]! & 0xe0) === 0xe0)) return 'mp3';
  const named = `${file.contentType} ${file.filename}`.toLowerCase();
  if (/mpeg|mp3|mpga/.test(named)) return 'mp3';
  if (/wav/.test(named)) return 'wav';
  if (/flac/.test(named)) return 'flac';
  if (/ogg|opus|oga/.test(named)) return 'ogg';
  if (/webm/.test(named)) return 'webm';
  if (/mp4|m4a|aac/.test(named)) return 'mp4';
  return 'other';
}

/** Milliseconds a WAV file's data plays, by its header (its fmt chunk's byte rate, its data chunk's size); null: unread. */
function wavMs(head: Buffer, size: number): bigint | null {
  let at = 12;
  let byteRate = 0;
  while (at + 8 <= head.length) {
    const id = head.subarray(at, at + 4).toString('latin1');
    const length = head.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 16 <= head.length) byteRate = head.readUInt32LE(at + 16);
    if (id === 'data') {
      if (byteRate <= 0) return null;
      // Every byte after the data chunk's header, whatever size it declares: a streamed WAV's says 0 or 0xFFFFFFFF,
      // and a header that declares less than the file holds must not bound the call below what a decoder plays.
      return ceilDiv(BigInt(Math.max(size - at - 8, 0)) * 1000n, BigInt(byteRate));
    }
    at += 8 + length + (length % 2);
  }
  return null;
}

/** Milliseconds a FLAC file plays, by its STREAMINFO block (its sample rate and total samples); null: not said. */
function flacMs(head: Buffer): bigint | null {
  // "fLaC", the block's header (4 bytes), then STREAMINFO: 10 bytes of block and frame sizes, then 20 bits of rate,
  // 3 of channels, 5 of bits per sample and 36 of total samples.
  if (head.length < 8 + 18) return null;
  const at = 8 + 10;
  const rate = (head[at]! << 12) | (head[at + 1]! << 4) | (head[at + 2]! >> 4);
  const samples = (BigInt(head[at + 3]! & 0x0f) << 32n) | BigInt(head.readUInt32BE(at + 4));
  if (rate <= 0 || samples === 0n) return null;
  return ceilDiv(samples * 1000n, BigInt(rate));
}

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b;

/** The most milliseconds an audio file may play: its header's duration where it says it, else its size at its format's lowest bitrate. */
export function audioBoundMs(file: Pick<FormFile, 'head' | 'contentType' | 'filename' | 'size'>): bigint {
  const format = audioFormatOf(file);
  const read = format === 'wav' ? wavMs(file.head, file.size) : format === 'flac' ? flacMs(file.head) : null;
  if (read !== null) return read;
  return ceilDiv(BigInt(file.size) * 8000n, BigInt(LOWEST_BITRATE[format]));
}
