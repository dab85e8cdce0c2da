/**
 * Which headers cross the gateway. Towards the upstream: everything the client
 * sent except its credentials, cookies, hop-by-hop and proxy headers, then the
 * connection's own key the way its profile wants it. Back to the client: the
 * content type and what a client needs (the provider's request id, rate-limit
 * headers, retry-after), nothing else.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { AppError } from '../errors.js';

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
  'authorization',
  'x-api-key',
  'cookie',
  'content-length',
  // The gateway reads usage from the answer: it asks for it uncompressed.
  'accept-encoding',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
  // Which of the operator's OpenAI organizations and projects the connection's key bills is the
  // operator's choice (the connection), not the end user's.
  'openai-organization',
  'openai-project',
]);

const CR_LF = /[\r\n\0]/;

export type ProtocolProfile = 'openai' | 'anthropic';

/** Headers for the upstream request; throws 400 on a header value holding CR, LF or NUL. */
export function upstreamHeaders(
  incoming: IncomingHttpHeaders,
  profile: ProtocolProfile,
  apiKey: string,
  contentLength: number,
): Record<string, string | string[]> {
  const connectionListed = new Set(
    String(incoming.connection ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    if (DROPPED.has(name) || connectionListed.has(name) || name.startsWith('x-nexus-') || name.startsWith('proxy-')) continue;
    const values = Array.isArray(value) ? value : [value];
    for (const v of values) {
      if (CR_LF.test(v)) throw new AppError('unsafe_proxy_request', `The header ${name} holds a line break`, { param: name });
    }
    out[name] = value;
  }
  if (profile === 'anthropic') out['x-api-key'] = apiKey;
  else out['authorization'] = `Bearer ${apiKey}`;
  out['accept-encoding'] = 'identity';
  if (contentLength > 0) out['content-length'] = String(contentLength);
  return out;
}

const PASSED_BACK = new Set([
  'content-type',
  'content-disposition',
  'x-request-id',
  'request-id',
  'retry-after',
  'retry-after-ms',
  'openai-processing-ms',
  'openai-version',
  'openai-organization',
  'anthropic-organization-id',
]);

/** The upstream's answer headers a client needs. */
export function clientHeaders(upstream: Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value === undefined) continue;
    if (PASSED_BACK.has(name) || name.includes('ratelimit')) out[name] = value;
  }
  return out;
}
