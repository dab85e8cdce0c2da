/**
 * A multipart upload (an image edit, a transcription) read on its way through, never held whole: its bytes go
 * as they came to a spool (memory up to SPOOL_IN_MEMORY, then a temporary file), while a scanner reads its parts
 * for what the endpoint needs to bound the call (FormRead: its small text fields, and of each file its name, type,
 * size and first bytes). Once admitted, the spool is sent upstream as a stream, as many times as the call's
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
import { FORM_FILE_HEAD, type FormFile, type FormRead } from '../protocols/protocol.js';
import { ScavengePacer } from './scavenge-pacer.js';

/** An upload this size or less stays in memory; a larger one is spooled to a temporary file. */
const SPOOL_IN_MEMORY = 1 << 20;
/** A spool file is read this much at a time. */
const SPOOL_READ = 64 * 1024;
/** A text field longer than this is refused (a prompt is at most 32,000 characters). */
const MAX_FIELD_BYTES = 256 * 1024;
/** The text fields of one upload, all told; and its parts. */
const MAX_FIELDS_BYTES = 1 << 20;
const MAX_PARTS = 64;
/** A part's headers. */
const MAX_PART_HEADERS = 16 * 1024;

const malformed = (why: string) => new AppError('invalid_request', `The multipart/form-data body is malformed: ${why}`, { param: 'body' });

/** The boundary of a `multipart/form-data` Content-Type, or undefined when it is not one. */
export function boundaryOf(contentType: string | undefined): string | undefined {
  if (!contentType || !/^\s*multipart\/form-data\s*(;|$)/i.test(contentType)) return undefined;
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^;\s]{1,70}))/i.exec(contentType);
  const boundary = match?.[1] ?? match?.[2];
  if (!boundary) throw malformed('its Content-Type names no boundary');
  return boundary;
}

interface Part {
  name: string;
  start: number;
  file: FormFile | undefined;
  value: Buffer[];
  valueBytes: number;
}

const CRLF_CRLF = Buffer.from('\r\n\r\n');

/** Told the bytes of an upload's first file as they come, with the text fields read before it. */
export type FileSink = (bytes: Buffer, fieldsBefore: Readonly<Record<string, string>>) => void;

/** A multipart body's parts read as its bytes come (RFC 7578): what FormRead keeps of them. */
export class FormScanner {
  private readonly delimiter: Buffer;
  /** Bytes not yet read: at most a delimiter's length, or a part's headers. */
  private pending: Buffer = Buffer.from('\r\n');
  /** Where `pending` starts in the body (its first line break is the scanner's, before the body's first byte). */
  private offset = -2;
  /** Where each text field's value lies in the body: [start, end). */
  readonly spans = new Map<string, [number, number]>();
  /** Where each file's bytes lie in the body, in the order of FormRead's files: [start, end). */
  readonly fileSpans: [number, number][] = [];
  private state: 'body' | 'delimited' | 'headers' | 'done' = 'body';
  private part: Part | undefined;
  /** Without a prototype: a part may be named anything (`__proto__` too). */
  private readonly fields: Record<string, string> = Object.create(null) as Record<string, string>;
  private readonly files: FormFile[] = [];
  private fieldBytes = 0;
  private parts = 0;
  private bytes = 0;

  /**
   * `onFile`: told the bytes of the upload's first file as they come, with the text fields read before it (a batch's
   * JSONL, read line by line: batches/batch-lines.ts); what it throws refuses the upload.
   */
  constructor(
    boundary: string,
    private readonly onFile?: FileSink,
  ) {
    this.delimiter = Buffer.from(`\r\n--${boundary}`);
  }

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.state === 'done') return;
    this.take(chunk);
    for (;;) {
      if (this.state === 'body') {
        const at = this.pending.indexOf(this.delimiter);
        if (at < 0) {
          const keep = Math.min(this.pending.length, this.delimiter.length - 1);
          this.data(this.pending.subarray(0, this.pending.length - keep));
          this.skip(this.pending.length - keep);
          return;
        }
        this.data(this.pending.subarray(0, at));
        this.endPart();
        this.skip(at + this.delimiter.length);
        this.state = 'delimited';
      } else if (this.state === 'delimited') {
        if (this.pending.length < 2) return;
        const next = this.pending.toString('latin1', 0, 2);
        if (next === '--') {
          this.state = 'done';
          this.pending = Buffer.alloc(0);
          return;
        }
        if (next !== '\r\n') throw malformed('a boundary is not followed by a line break');
        this.skip(2);
        this.state = 'headers';
      } else if (this.state === 'headers') {
        const at = this.pending.indexOf(CRLF_CRLF);
        if (at < 0) {
          if (this.pending.length > MAX_PART_HEADERS) throw malformed('a part has headers longer than 16 KiB');
          return;
        }
        const headers = this.pending.toString('utf8', 0, at);
        this.skip(at + 4);
        this.startPart(headers);
        this.state = 'body';
      } else {
        return;
      }
    }
  }

  /**
   * A chunk joins what is pending. In a part's body, what is pending is at most a delimiter's length less one: when
   * no delimiter starts there, it is the part's and the chunk is taken as it is, not copied (an upload's every
   * chunk would be).
   */
  private take(chunk: Buffer): void {
    const pending = this.pending;
    if (!pending.length) {
      this.pending = chunk;
      return;
    }
    if (this.state === 'body' && pending.length < this.delimiter.length && chunk.length >= this.delimiter.length - 1) {
      const junction = Buffer.concat([pending, chunk.subarray(0, this.delimiter.length - 1)]);
      if (junction.indexOf(this.delimiter) < 0) {
        this.data(pending);
        this.offset += pending.length;
        this.pending = chunk;
        return;
      }
    }
    this.pending = Buffer.concat([pending, chunk]);
  }

  /** The first `n` bytes pending are read. */
  private skip(n: number): void {
    this.pending = this.pending.subarray(n);
    this.offset += n;
  }

  /** What was read; 400 when the body ended before its closing boundary. */
  end(): FormRead {
    if (this.state !== 'done') throw malformed('it ends before its closing boundary');
    return { fields: this.fields, files: this.files, bytes: this.bytes };
  }

  private startPart(headers: string): void {
    if (++this.parts > MAX_PARTS) throw malformed(`it has more than ${MAX_PARTS} parts`);
    const disposition = /^content-disposition:\s*form-data(.*)$/im.exec(headers)?.[1];
    if (disposition === undefined) throw malformed('a part has no Content-Disposition: form-data');
    const name = paramOf(disposition, 'name');
    if (name === undefined) throw malformed('a part has no name');
    const filename = paramOf(disposition, 'filename');
    const contentType = /^content-type:\s*(.*)$/im.exec(headers)?.[1]?.trim() ?? '';
    const file = filename === undefined ? undefined : { field: name, filename, contentType, size: 0, head: Buffer.alloc(0) };
    this.part = { name, start: this.offset, file, value: [], valueBytes: 0 };
  }

  private data(bytes: Buffer): void {
    const part = this.part;
    if (!part || !bytes.length) return;
    const file = part.file;
    if (file) {
      if (this.onFile && this.files.length === 0) this.onFile(bytes, this.fields);
      if (file.head.length < FORM_FILE_HEAD) file.head = Buffer.concat([file.head, bytes.subarray(0, FORM_FILE_HEAD - file.head.length)]);
      file.size += bytes.length;
      return;
    }
    part.valueBytes += bytes.length;
    this.fieldBytes += bytes.length;
    if (part.valueBytes > MAX_FIELD_BYTES)
      throw new AppError('invalid_parameter', `${part.name} is longer than 256 KiB`, { param: part.name });
    if (this.fieldBytes > MAX_FIELDS_BYTES) throw malformed('its text fields are longer than 1 MiB all told');
    part.value.push(Buffer.from(bytes));
  }

  private endPart(): void {
    const part = this.part;
    this.part = undefined;
    if (!part) return;
    if (part.file) {
      this.files.push(part.file);
      this.fileSpans.push([part.start, part.start + part.file.size]);
    } else {
      this.fields[part.name] = Buffer.concat(part.value).toString('utf8');
      this.spans.set(part.name, [part.start, part.start + part.valueBytes]);
    }
  }
}

/** A parameter of a Content-Disposition (`name="file"`), quoted or not. */
function paramOf(disposition: string, param: string): string | undefined {
  const match = new RegExp(`;\\s*${param}=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]*))`, 'i').exec(disposition);
  if (!match) return undefined;
  return match[1] !== undefined ? match[1].replace(/\\(.)/g, '$1') : match[2];
}

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
