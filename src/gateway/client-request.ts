/**
 * What the gateway reads of a client's request before its call: the inference key it sends and its body
 * (read whole, up to a limit, while the key is looked up).
 */
import type { IncomingMessage } from 'node:http';
import { AppError } from '../errors.js';
import { bearerOf } from '../web/error-response.js';
import { rawHeader } from './headers.js';
import { CALLER_KEY_HEADERS, CALLER_KEY_QUERIES } from '../protocols/index.js';

const KEY_HEADERS_NAMED = [
  ...CALLER_KEY_HEADERS.map((h) => (h === 'authorization' ? 'Authorization: Bearer' : h)),
  ...CALLER_KEY_QUERIES.map((q) => `?${q}=`),
].join(', ');

/** The value of `name` in a query string ('' or '?...'), if it has one. */
function queryParam(search: string, name: string): string | undefined {
  if (!search.includes(`${name}=`) && !search.includes('%')) return undefined;
  return new URLSearchParams(search).get(name) ?? undefined;
}

/**
 * The query string the upstream gets: without the parameters an inference key may come in (whatever the
 * connection: the key must never leave the gateway), otherwise as sent.
 */
export function upstreamSearch(search: string): string {
  // A name may come percent-encoded (`%6Bey=`): then every pair is read.
  if (!search.includes('%') && !CALLER_KEY_QUERIES.some((q) => search.includes(`${q}=`))) return search;
  const params = search
    .slice(1)
    .split('&')
    .filter((pair) => !CALLER_KEY_QUERIES.includes(decodeURIComponentSafe(pair.split('=')[0]!)));
  return params.length ? `?${params.join('&')}` : '';
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The inference key, where a protocol's SDK sends it (Authorization: Bearer, x-api-key, api-key,
 * x-goog-api-key: the protocols' callerKeyHeaders, in that order; then their callerKeyQuery, `?key=`);
 * 401 without one.
 */
export function credentialOf(req: IncomingMessage): string {
  for (const name of CALLER_KEY_HEADERS) {
    const value = rawHeader(req.rawHeaders, name);
    const key = name === 'authorization' ? bearerOf(value) : value?.trim();
    if (key) return key;
  }
  const q = req.url!.indexOf('?');
  if (q >= 0) {
    const search = req.url!.slice(q);
    for (const name of CALLER_KEY_QUERIES) {
      const key = queryParam(search, name)?.trim();
      if (key) return key;
    }
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
 * Whether the request asks to become a WebSocket (`Upgrade: websocket`). A Realtime session's handshake is taken
 * by the server's 'upgrade' listener (src/realtime/realtime-gateway.ts); any other comes here as a plain request.
 */
export function asksForWebSocket(req: IncomingMessage): boolean {
  const upgrade = rawHeader(req.rawHeaders, 'upgrade');
  return upgrade !== undefined && upgrade.split(',').some((token) => token.trim().toLowerCase() === 'websocket');
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
