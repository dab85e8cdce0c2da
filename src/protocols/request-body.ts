/**
 * A metered request's JSON body, read: what every endpoint that reads its own request shares with the gateway's reading;
 * and a multipart request as the gateway read it (FormRead), which an endpoint's `form` reads.
 */
import { AppError } from '../errors.js';

/** JSON is UTF-8 (RFC 8259): a body that is not is refused, not read with its bad bytes replaced. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A metered request's body as a JSON object; 400 invalid_json for anything else. */
export function jsonObjectOf(raw: Buffer): Record<string, unknown> {
  let text: string;
  try {
    text = UTF8.decode(raw);
  } catch {
    throw new AppError('invalid_json', 'The request body is not valid UTF-8');
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new AppError('invalid_json', 'A metered endpoint needs a JSON body');
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw new AppError('invalid_json', 'A metered endpoint needs a JSON object body');
  }
  return body as Record<string, unknown>;
}

/**
 * A multipart request (an image edit, a transcription) as the gateway read it on its way through, never held whole:
 * its small text fields, and of each file its field, name, type, size and first bytes (a container's header).
 */
export interface FormRead {
  /** The text fields, by name (a name given twice: its last value). */
  fields: Readonly<Record<string, string>>;
  files: readonly FormFile[];
  /** The whole body's length in bytes. */
  bytes: number;
}

/** A file of a multipart request. */
export interface FormFile {
  field: string;
  filename: string;
  /** Its part's Content-Type ('' when none). */
  contentType: string;
  size: number;
  /** Its first bytes (up to FORM_FILE_HEAD). */
  head: Buffer;
}

/** How many of a file's first bytes a FormRead keeps: enough for a WAV, FLAC or MP3 header. */
export const FORM_FILE_HEAD = 4096;
