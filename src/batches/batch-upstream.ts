/**
 * What every Batch API operation shares (batch-gateway.ts): the request it answers, the call upstream on its
 * connection, and the answer written back with Nexus's headers, or a refusal in the connection's error shape.
 */
import type { Readable } from 'node:stream';
import type { Clock } from '../domain/actor.js';
import type { Logger } from '../observability/logger.js';
import type { QuotaRepo } from '../domain/quota/quota-repo.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { AppError } from '../errors.js';
import { sendError } from '../gateway/answers.js';
import { upstreamOf } from '../gateway/auth-cache.js';
import type { CallMeter } from '../gateway/call-meter.js';
import { upstreamSearch } from '../gateway/client-request.js';
import { upstreamHeaders } from '../gateway/headers.js';
import type { createUpstreamPools } from '../gateway/upstreams.js';
import type { HandedBack, TakenRequest } from '../gateway/taken-paths.js';
import type { BatchRepo } from './batch-repo.js';

export interface BatchPath {
  /** What comes before `files` or `batches` (`v1/`, `openai/`, `openai/v1/`): where the batch's own paths go upstream. */
  prefix: string;
  resource: 'files' | 'batches';
  id: string | undefined;
  action: 'content' | 'cancel' | 'results' | undefined;
  /** What Nexus does with it (`results`: a batch's results, or its DELETE, passed through for its access). */
  operation: 'upload' | 'create' | 'list' | 'read' | 'cancel' | 'file' | 'results';
  /** Its requests come in its body (Anthropic's Message Batches), not in a file. */
  inline?: boolean;
}

export interface BatchGatewayDeps {
  repo: BatchRepo;
  quotaRepo: QuotaRepo;
  meter: CallMeter;
  pools: ReturnType<typeof createUpstreamPools>;
  secretBox: SecretBox;
  clock: Clock;
  logger: Logger;
  bodyLimitBytes: number;
}

/** One Batch API request, its key's access and connection known (handed over by the gateway). */
export interface BatchRequest extends TakenRequest {
  path: BatchPath;
}

/**
 * A request this module does not meter, handed back to the gateway's flow, where its passthrough class decides: an
 * upload whose purpose is not `batch`, or, where the workspace or the plan lets its class through, a batch or file
 * Nexus did not see. `body`: what was read of its body (none: the flow reads it).
 */
export type Fallback = HandedBack;

/** What the upstream answered: its status, headers and body (a stream). */
interface Answer {
  status: number;
  contentType: string | undefined;
  body: Readable;
}

export const readJson = async (body: Readable): Promise<Record<string, unknown> | undefined> => {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  try {
    const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
};

export const stringOr = (value: unknown): string | null => (typeof value === 'string' && value ? value : null);

export const notFound = (what: 'batch' | 'file') =>
  new AppError(what === 'batch' ? 'batch_not_found' : 'file_not_found', `No ${what} with that id`, { param: `${what}_id` });

/** The connection and access a batch or file belongs to. */
export const owned = (r: BatchRequest) => ({ connectionId: r.auth.connection_id!, accessId: r.auth.workspace_access_id });

/** Sends a request upstream on the call's connection, at `path` under its base URL (with the call's query). */
export async function upstream(
  deps: BatchGatewayDeps,
  r: BatchRequest,
  method: string,
  path: string,
  body: Buffer | Readable | null,
  length: number,
): Promise<Answer> {
  const up = upstreamOf(r.entry, r.auth, deps.secretBox);
  const base = up.baseUrl;
  const full = `${base.pathname.replace(/\/$/, '')}/${path}${upstreamSearch(r.target.search)}`;
  const headers = upstreamHeaders(r.req.rawHeaders, r.protocol, up.apiKey, length);
  try {
    const answer = await deps.pools.get(base).request({ method, path: full, headers, body, headersTimeout: 120_000 });
    const type = answer.headers['content-type'];
    return { status: answer.statusCode, contentType: Array.isArray(type) ? type[0] : type, body: answer.body };
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw new AppError('upstream_unavailable', 'The provider did not answer');
  }
}

/** The answer's head: the upstream's status and type, and Nexus's headers (a batch's requests are metered: docs/batches.md). */
function answerHead(deps: BatchGatewayDeps, r: BatchRequest, status: number, contentType: string | undefined): void {
  const headers: Record<string, string> = { 'x-nexus-request-id': r.locals.requestId, 'x-nexus-metering-status': 'metered' };
  const view = deps.meter.quotaView(r.auth, deps.clock.now());
  if (view) {
    headers['x-nexus-quota-remaining'] = view.remaining.toString();
    headers['x-nexus-quota-reset'] = view.reset.toISOString();
  }
  if (contentType) headers['content-type'] = contentType;
  r.res.writeHead(status, headers);
}

/** The upstream's answer passed back as it came (a file's content streamed). */
export async function passBack(deps: BatchGatewayDeps, r: BatchRequest, answer: Answer): Promise<void> {
  answerHead(deps, r, answer.status, answer.contentType);
  for await (const chunk of answer.body) if (!r.res.write(chunk)) await new Promise((ok) => r.res.once('drain', ok));
  r.res.end();
}

export function sendJson(deps: BatchGatewayDeps, r: BatchRequest, status: number, body: unknown): void {
  answerHead(deps, r, status, 'application/json');
  r.res.end(JSON.stringify(body));
}

/** A refusal in the connection's error shape, with the access's quota and rate headers. */
export function refuse(deps: BatchGatewayDeps, r: Pick<BatchRequest, 'res' | 'locals' | 'auth' | 'protocol'>, err: unknown): void {
  const now = deps.clock.now();
  sendError(r.res, {
    locals: r.locals,
    err,
    metered: true,
    quota: deps.meter.quotaView(r.auth, now),
    rate: deps.meter.rateView(r.auth, now),
    now: now.getTime(),
    protocol: r.protocol,
  });
}

/**
 * A batch as the caller gets it: its `results_url` (Anthropic's, where the SDK reads its results) made the gateway's,
 * so the results are read through Nexus, for the batch's access only.
 */
export function withGatewayUrls(r: BatchRequest, batch: Record<string, unknown>): Record<string, unknown> {
  if (typeof batch.results_url !== 'string' || typeof batch.id !== 'string') return batch;
  const host = r.req.headers.host ?? '127.0.0.1';
  const scheme = (r.req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  const base = `${scheme}://${host}/providers/${r.target.connectionId}/${r.path.prefix}batches/${encodeURIComponent(batch.id)}/results`;
  return { ...batch, results_url: base };
}
