/**
 * What the gateway reads of a client's request before its call: the inference key it sends and its body
 * (read whole, up to a limit, while the key is looked up).
 */
import type { IncomingMessage } from 'node:http';
import { AppError } from '../errors.js';
import { bearerOf } from '../web/error-response.js';
import { rawHeader } from './headers.js';
import { CALLER_KEY_HEADERS } from './protocols/index.js';

const KEY_HEADERS_NAMED = CALLER_KEY_HEADERS.map((h) => (h === 'authorization' ? 'Authorization: Bearer' : h)).join(', ');

/**
 * The inference key, where a protocol's SDK sends it (Authorization: Bearer, x-api-key, api-key: the
 * protocols' callerKeyHeaders, in that order); 401 without one.
 */
export function credentialOf(req: IncomingMessage): string {
  for (const name of CALLER_KEY_HEADERS) {
    const value = rawHeader(req.rawHeaders, name);
    const key = name === 'authorization' ? bearerOf(value) : value?.trim();
    if (key) return key;
  }
  throw new AppError('missing_credentials', `Send the inference key as one of ${KEY_HEADERS_NAMED}`);
}

/** The request's body, whole; 413 past `limit` bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new AppError('payload_too_large', 'The request body is larger than the limit'));
        req.pause();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * A metered call's body must be the one its bound was read from: the gateway would bound one body and
 * send the upstream another were it compressed.
 */
export function assertIdentityEncoding(req: IncomingMessage): void {
  const encoding = rawHeader(req.rawHeaders, 'content-encoding');
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    throw new AppError(
      'invalid_request',
      `A metered endpoint needs an uncompressed body (this one came as Content-Encoding: ${encoding})`,
      {
        param: 'content-encoding',
      },
    );
  }
}
