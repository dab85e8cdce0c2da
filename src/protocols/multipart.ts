/**
 * A `multipart/form-data` body's parts read as its bytes come (RFC 7578), never held whole: FormScanner keeps what an
 * endpoint needs to bound a call (FormRead: its small text fields, and of each file its name, type, size and first
 * bytes) and where each lies in the body. upload.ts feeds it an upload's bytes on their way to the spool.
 */
import { AppError } from '../errors.js';
import { FORM_FILE_HEAD, type FormFile, type FormRead } from './protocol.js';

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
