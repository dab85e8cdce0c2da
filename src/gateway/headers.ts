/**
 * Which headers cross the gateway. Towards the upstream: everything the client
 * sent except its credentials (wherever any protocol lets a caller put its key:
 * CALLER_KEY_HEADERS), the headers its protocol drops, cookies, hop-by-hop and
 * proxy headers, then the connection's own key the way its protocol wants it
 * (src/protocols/). Back to the client: the
 * content type and what a client needs (the provider's request id,
 * retry-after: its protocol's passedBack), nothing else.
 */
import { AppError } from '../errors.js';
import { CALLER_KEY_HEADERS } from '../protocols/index.js';
import type { Protocol } from '../protocols/protocol.js';

const DROPPED = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  ...CALLER_KEY_HEADERS,
  'cookie',
  'content-length',
  // The gateway reads usage from the answer: it asks for it uncompressed.
  'accept-encoding',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
]);

const CR_LF = /[\r\n\0]/;

/** The first value of a header in node's rawHeaders (names as sent, any case), or undefined. */
export function rawHeader(raw: string[], name: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]!;
    if (n.length === name.length && n.toLowerCase() === name) return raw[i + 1];
  }
  return undefined;
}

/**
 * The header names a Connection header lists beyond those dropped anyway (a client's usual `keep-alive`): none, most
 * calls, makes no set.
 */
function listedBesidesDropped(connection: string): Set<string> | undefined {
  let listed: Set<string> | undefined;
  for (const part of connection.split(',')) {
    const name = part.trim().toLowerCase();
    if (name && !DROPPED.has(name)) (listed ??= new Set()).add(name);
  }
  return listed;
}

/**
 * Headers for the upstream request, as undici takes them (name, value, ...), from the client's raw
 * headers; throws 400 on a header value holding CR, LF or NUL.
 */
export function upstreamHeaders(raw: string[], protocol: Protocol, apiKey: string, contentLength: number): string[] {
  const connection = rawHeader(raw, 'connection');
  const connectionListed = connection ? listedBesidesDropped(connection) : undefined;
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (DROPPED.has(name) || connectionListed?.has(name) || name.startsWith('x-nexus-') || name.startsWith('proxy-')) continue;
    if (protocol.droppedHeaders.includes(name)) continue;
    const value = raw[i + 1]!;
    if (CR_LF.test(value)) throw new AppError('unsafe_proxy_request', `The header ${name} holds a line break`, { param: name });
    out.push(name, value);
  }
  protocol.authHeaders(out, apiKey);
  out.push('accept-encoding', 'identity');
  if (contentLength > 0) out.push('content-length', String(contentLength));
  return out;
}

/**
 * The upstream's answer headers a client needs, added to `out` (name, value, ...): those its protocol passes back
 * (`passedBack`, protocol.ts: the content's type, a request id, Retry-After, and its API's own). Its rate-limit
 * headers (`x-ratelimit-*`, `anthropic-ratelimit-*`) are not among them: they describe the operator's provider
 * account, shared by every access; Nexus writes its own for the access's plan (docs/rate-limits.md).
 */
export function clientHeaderList(
  upstream: Record<string, string | string[] | undefined>,
  out: string[],
  passedBack: ReadonlySet<string>,
): void {
  for (const name in upstream) {
    if (!passedBack.has(name)) continue;
    const value = upstream[name];
    if (typeof value === 'string') out.push(name, value);
    else if (value) for (const v of value) out.push(name, v);
  }
}
