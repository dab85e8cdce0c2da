/** A metered request's JSON body, read: what every endpoint that reads its own request shares with the gateway's reading. */
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
