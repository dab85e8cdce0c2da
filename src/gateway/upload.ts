/**
 * A multipart upload (an image edit, a transcription) read on its way through, never held whole: its bytes go
 * as they came to a spool (memory up to SPOOL_IN_MEMORY, then a temporary file), while a scanner (multipart.ts)
 * reads its parts for what the endpoint needs to bound the call. Once admitted, the spool is sent upstream as a stream, as many times as the call's
 * attempts need, and deleted when the call ends. The buffers of a large upload's reads are collected as they go
 * (scavenge-pacer.ts), both ways.
 */
import { createHash, randomUUID } from 'node:crypto';
import { close, createWriteStream, open, read, type WriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { AppError } from '../errors.js';
import type { FormRead } from '../protocols/protocol.js';
import { FormScanner, type FileSink } from '../protocols/multipart.js';
import { ScavengePacer } from './scavenge-pacer.js';

/** An upload this size or less stays in memory; a larger one is spooled to a temporary file. */
const SPOOL_IN_MEMORY = 1 << 20;
/** A spool file is read this much at a time. */
const SPOOL_READ = 64 * 1024;
/** A field's value replaced in an upload as it is sent: where it lay, and what goes there instead. */
interface Replaced {
  span: [number, number];
  value: Buffer;
}

/** What a request log keeps of an upload (docs/request-logs.md): its text fields, and of each file all but its bytes. */
export interface FormSummary {
  files: { field: string; filename: string; contentType: string; size: number; sha256: string | null }[];
  fields: Readonly<Record<string, string>>;
}

/** Where an upload's text fields and files lie in its body. */
type Spans = { fields: ReadonlyMap<string, [number, number]>; files: readonly [number, number][] };

/** An upload read whole (its form, its length) and spooled: sent upstream as a stream, from its start, per attempt. */
export class Upload {
  /** Its spool is kept past dispose() until release() (a call whose request log may summarize it). */
  private held = false;
  private disposeAsked = false;

  constructor(
    readonly form: FormRead,
    readonly length: number,
    private readonly memory: Buffer | undefined,
    private readonly path: string | undefined,
    private readonly spans: Spans,
    private readonly replaced?: Replaced,
  ) {}

  /**
   * Its text fields, and of each file its field, name, type, size and SHA-256, the files' bytes read again from the
   * spool (held for it: a call with a request log, after its answer). A spool that cannot be read: SHA-256 null.
   */
  async summary(): Promise<FormSummary> {
    const files: FormSummary['files'] = [];
    for (const [i, f] of this.form.files.entries()) {
      const [start, end] = this.spans.files[i]!;
      let sha256: string | null = null;
      try {
        const hash = createHash('sha256');
        for await (const chunk of this.range(start, end)) hash.update(chunk as Buffer);
        sha256 = hash.digest('hex');
      } catch {
        // No checksum.
      }
      files.push({ field: f.field, filename: f.filename, contentType: f.contentType, size: f.size, sha256 });
    }
    return { files, fields: this.form.fields };
  }

  hold(): void {
    this.held = true;
  }

  /**
   * Its spool no longer held: deleted if dispose() was asked meanwhile. Never rejects: it ends a call's request log
   * after the call (metered-call.ts), where a failed delete must not become an unhandled rejection; the spool
   * directory's files are temporary.
   */
  release(): Promise<void> {
    this.held = false;
    return this.disposeAsked ? this.dispose().catch(() => undefined) : Promise.resolve();
  }

  /** Its bytes, from the first (a field replaced: the bytes around it, and its new value between). */
  open(): Readable {
    const r = this.replaced;
    if (!r) return this.range(0, this.length);
    const end = this.length - r.value.length + (r.span[1] - r.span[0]);
    const parts = [this.range(0, r.span[0]), Readable.from([r.value]), this.range(r.span[1], end)];
    return Readable.from(
      (async function* () {
        for (const part of parts) for await (const chunk of part) yield chunk as Buffer;
      })(),
    );
  }

  /** Its spooled bytes [start, end). */
  private range(start: number, end: number): Readable {
    if (!this.path) return Readable.from([this.memory!.subarray(start, end)]);
    return new SpoolRange(this.path, start, end);
  }

  /**
   * The upload with a text field's value replaced (a route target's model map): sent from the same spool, the
   * bytes around the field as they came. A field it does not have: the upload as it is.
   */
  withField(name: string, value: string): Upload {
    const span = this.spans.fields.get(name);
    if (!span || this.replaced) return this;
    const bytes = Buffer.from(value);
    const length = this.length - (span[1] - span[0]) + bytes.length;
    return new Upload(
      { ...this.form, fields: { ...this.form.fields, [name]: value }, bytes: length },
      length,
      this.memory,
      this.path,
      this.spans,
      {
        span,
        value: bytes,
      },
    );
  }

  /**
   * Deletes its spool file, if it has one (an upload with a field replaced shares its original's, which deletes it);
   * held, once released.
   */
  async dispose(): Promise<void> {
    this.disposeAsked = true;
    if (!this.held && this.path && !this.replaced) await rm(this.path, { force: true });
  }
}

/**
 * A spool file's bytes [start, end), read 64 KiB at a time as the stream is read, its reads' buffers paced. Destroyed
 * mid-read (the attempt ended), it closes its file once that read is back, never under it.
 */
class SpoolRange extends Readable {
  private fd = -1;
  private readonly pacer = new ScavengePacer();
  /** A read under way; and what is to run once it is back (the stream was destroyed meanwhile). */
  private reading = false;
  private afterRead: (() => void) | undefined;

  constructor(
    private readonly path: string,
    private at: number,
    private readonly end: number,
  ) {
    super({ highWaterMark: SPOOL_READ });
  }

  override _construct(callback: (err?: Error | null) => void): void {
    open(this.path, 'r', (err, fd) => {
      if (!err) this.fd = fd;
      callback(err);
    });
  }

  override _read(): void {
    const length = Math.min(SPOOL_READ, this.end - this.at);
    if (length <= 0) return void this.push(null);
    this.reading = true;
    read(this.fd, Buffer.allocUnsafeSlow(length), 0, length, this.at, (err, n, buf) => {
      this.reading = false;
      if (this.destroyed) return void this.afterRead?.();
      if (err) return void this.destroy(err);
      if (n === 0) return void this.destroy(new Error("The upload's spool file ended before its length"));
      this.at += n;
      this.pacer.read(n);
      this.push(n === length ? buf : buf.subarray(0, n));
    });
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    const closed = () => (this.fd < 0 ? callback(err) : close(this.fd, () => callback(err)));
    if (this.reading) this.afterRead = closed;
    else closed();
  }
}

/** What a call sends upstream: a JSON body's bytes, or an upload. */
export type Sendable = Buffer | Upload;

/**
 * A multipart request's body, read and spooled as it comes (the client paused while the spool file catches up);
 * 413 past `limit` bytes, 400 for a malformed body (or what `onFile` throws). The spool file of a body that fails is
 * deleted.
 */
export function readUpload(req: IncomingMessage, limit: number, boundary: string, onFile?: FileSink): Promise<Upload> {
  return new Promise((resolve, reject) => {
    const scanner = new FormScanner(boundary, onFile);
    const pacer = new ScavengePacer();
    let chunks: Buffer[] | null = [];
    let size = 0;
    let file: WriteStream | undefined;
    let path: string | undefined;
    let failed = false;
    const fail = (err: Error) => {
      if (failed) return;
      failed = true;
      req.pause();
      req.off('data', onData);
      if (file) file.destroy();
      if (path) void rm(path, { force: true });
      reject(err);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      pacer.read(chunk.length);
      if (size > limit) return fail(new AppError('payload_too_large', 'The request body is larger than the limit'));
      try {
        scanner.push(chunk);
      } catch (err) {
        return fail(err as Error);
      }
      if (chunks) {
        chunks.push(chunk);
        if (size <= SPOOL_IN_MEMORY) return;
        path = join(tmpdir(), `nexus-upload-${randomUUID()}`);
        file = createWriteStream(path, { flags: 'wx', mode: 0o600 });
        file.on('error', fail);
        const held = chunks;
        chunks = null;
        for (const c of held) file.write(c);
      } else if (!file!.write(chunk)) {
        req.pause();
        file!.once('drain', () => req.resume());
      }
    };
    req.on('data', onData);
    req.on('error', fail);
    let ended = false;
    // A client that leaves mid-upload: its spool file goes at once.
    req.on('close', () => {
      if (!ended) fail(new Error('The client closed the connection before its upload ended'));
    });
    req.on('end', () => {
      ended = true;
      if (failed) return;
      let form: FormRead;
      try {
        form = scanner.end();
      } catch (err) {
        return fail(err as Error);
      }
      const spans = { fields: scanner.spans, files: scanner.fileSpans };
      if (chunks) return resolve(new Upload(form, size, Buffer.concat(chunks), undefined, spans));
      file!.end(() => (failed ? undefined : resolve(new Upload(form, size, undefined, path, spans))));
    });
  });
}
