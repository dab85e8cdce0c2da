/**
 * The upstream probe behind testProviderConnection and verifyProviderConnection:
 * one real GET of the profile's model list (bedrock: its list of asynchronous
 * invocations: its protocol's `probe`) with the profile's authentication,
 * bounded by a short timeout, classified into what the caller needs to know.
 * The key goes to the upstream only; it never appears in a message.
 */
import { Agent, errors as undiciErrors, request } from 'undici';
import { guardedLookup, hostOf, isRefusedHost, PrivateUpstreamError } from '../security/upstream-guard.js';
import { protocolOf, type ProtocolProfile } from '../../protocols/index.js';

type ProviderCheckOutcome = 'reachable' | 'credentials_rejected' | 'unexpected_response' | 'unreachable' | 'timeout';

export interface ProviderCheckResult {
  outcome: ProviderCheckOutcome;
  httpStatus?: number;
  latencyMs: number;
  message: string;
  checkedAt: Date;
}

/** An empty body: the probe's GET, as a signing protocol signs it. */
const EMPTY = Buffer.alloc(0);

/**
 * The profile's probe (its table's `probe`): a GET of its path under baseUrl (every profile keeps `/v1` out of
 * baseUrl: the probe, like the SDKs, adds it), with its headers and the connection's auth as the gateway sends it
 * (authHeaders, and signRequest for a protocol that signs: Bedrock's SigV4).
 */
async function probeRequest(
  profile: ProtocolProfile,
  baseUrl: string,
  apiKey: string,
): Promise<{ url: string; headers: Record<string, string> }> {
  const protocol = protocolOf(profile);
  const url = `${baseUrl}/${protocol.probe.path}`;
  const list = ['accept', 'application/json', 'user-agent', 'nexus-provider-probe/1', ...(protocol.probe.headers ?? [])];
  protocol.authHeaders(list, apiKey);
  if (protocol.signRequest) await protocol.signRequest(apiKey, { method: 'GET', url: new URL(url), body: EMPTY, headers: list });
  const headers: Record<string, string> = {};
  for (let i = 0; i < list.length; i += 2) headers[list[i]!] = list[i + 1]!;
  return { url, headers };
}

export interface ProbeInput {
  profile: ProtocolProfile;
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  allowPrivate: boolean;
  now: () => Date;
}

function causeCode(err: unknown): string {
  let e = err as { code?: string; cause?: unknown; name?: string } | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (e instanceof PrivateUpstreamError) return e.code;
    if (e.code) return e.code;
    e = e.cause as typeof e;
  }
  return (err as Error | undefined)?.name ?? 'unknown error';
}

/** Far above the largest model lists seen (OpenRouter's, about 1 MB); a longer body is judged by its start. */
const MAX_PROBE_BODY_BYTES = 4 * 1024 * 1024;

function isJsonContentType(header: string | string[] | undefined): boolean {
  const type = (Array.isArray(header) ? header[0] : header)?.split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** The body's first bytes, at most `limit` of them, and whether that was all of it. */
async function readBody(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number): Promise<{ text: string; complete: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      return { text: Buffer.concat(chunks).toString('utf8'), complete: false };
    }
  }
  return { text: Buffer.concat(chunks).toString('utf8'), complete: true };
}

function isJsonObject(text: string, complete: boolean): boolean {
  const trimmed = text.replace(/^\uFEFF/, '');
  if (!complete) return /^\s*\{/.test(trimmed);
  try {
    const value: unknown = JSON.parse(trimmed);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

export async function probeProvider(input: ProbeInput): Promise<ProviderCheckResult> {
  const started = performance.now();
  const elapsed = () => Math.max(0, Math.round(performance.now() - started));
  const done = (outcome: ProviderCheckOutcome, message: string, httpStatus?: number): ProviderCheckResult => ({
    outcome,
    message,
    latencyMs: elapsed(),
    checkedAt: input.now(),
    ...(httpStatus !== undefined ? { httpStatus } : {}),
  });

  const { url, headers } = await probeRequest(input.profile, input.baseUrl, input.apiKey);
  const probed = url.slice(input.baseUrl.length);
  // IP literals never reach the lookup hook: check them here (a connection saved
  // while private upstreams were allowed, probed after they no longer are).
  if (isRefusedHost(hostOf(new URL(url)), input.allowPrivate)) {
    return done('unreachable', 'The upstream address is private and NEXUS_ALLOW_PRIVATE_UPSTREAMS is not set');
  }
  const agent = new Agent({
    connect: { lookup: guardedLookup(input.allowPrivate), timeout: input.timeoutMs },
    headersTimeout: input.timeoutMs,
    bodyTimeout: input.timeoutMs,
    keepAliveTimeout: 1,
  });
  const signal = AbortSignal.timeout(input.timeoutMs);
  try {
    // undici.request never follows redirects: a 3xx is reported, not chased to another host.
    const res = await request(url, { method: 'GET', headers, dispatcher: agent, signal });
    const status = res.statusCode;
    if (status >= 200 && status < 300) {
      // Only a JSON model list says a provider accepted the key: a 2xx HTML page
      // is a website, a login portal or a captive proxy, not a provider.
      const body = await readBody(res.body, MAX_PROBE_BODY_BYTES);
      if (isJsonContentType(res.headers['content-type']) && isJsonObject(body.text, body.complete)) {
        return done('reachable', `The upstream accepted the key (HTTP ${status})`, status);
      }
      return done(
        'unexpected_response',
        `The upstream answered HTTP ${status} to GET ${probed}, but not with a JSON object: check baseUrl (without /v1) and protocolProfile`,
        status,
      );
    }
    await res.body.dump().catch(() => {});
    if (status === 401 || status === 403) {
      return done('credentials_rejected', `The upstream refused the key (HTTP ${status})`, status);
    }
    return done(
      'unexpected_response',
      `The upstream answered HTTP ${status} to GET ${probed}: check baseUrl (without /v1) and protocolProfile`,
      status,
    );
  } catch (err) {
    const timedOut =
      signal.aborted ||
      err instanceof undiciErrors.HeadersTimeoutError ||
      err instanceof undiciErrors.ConnectTimeoutError ||
      err instanceof undiciErrors.BodyTimeoutError;
    if (timedOut) return done('timeout', `No answer from the upstream within ${input.timeoutMs} ms`);
    const code = causeCode(err);
    if (code === 'ERR_NEXUS_PRIVATE_UPSTREAM') {
      return done('unreachable', 'The upstream host resolves to a private address and NEXUS_ALLOW_PRIVATE_UPSTREAMS is not set');
    }
    return done('unreachable', `Could not reach the upstream (${code})`);
  } finally {
    agent.destroy().catch(() => {});
  }
}
