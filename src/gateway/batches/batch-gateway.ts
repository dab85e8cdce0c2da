/**
 * OpenAI's Batch API through the gateway, and Azure OpenAI's (docs/batches.md): the input file read line by line as it
 * arrives (batch-lines.ts) and sent once every line passed; a batch admitted on one quota lease at its file's bound;
 * its reads, its list and its cancel passed through for the access that made it only (another access's id answers
 * 404, as an unknown one does). Its settlement is batch-settlement.ts's.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Clock } from '../../domain/actor.js';
import type { QuotaRepo } from '../../domain/quota/quota-repo.js';
import type { SecretBox } from '../../domain/security/secret-box.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { protocolOf } from '../../protocols/index.js';
import type { Protocol } from '../../protocols/protocol.js';
import type { RequestLocals } from '../../web/locals.js';
import { Admitted, admitRate, assertBudget, assertModelAllowed, letsThrough } from '../admission.js';
import { sendError } from '../answers.js';
import { upstreamOf, type CacheEntry } from '../auth-cache.js';
import type { CallMeter } from '../call-meter.js';
import type { AuthRow } from '../call-repo.js';
import { readBody, upstreamSearch } from '../client-request.js';
import { upstreamHeaders } from '../headers.js';
import type { GatewayTarget } from '../path-safety.js';
import { readUpload, type Sendable } from '../upload.js';
import type { createUpstreamPools } from '../upstreams.js';
import { BatchLines, MAX_BATCH_FILE_BYTES, type BatchFileBound } from './batch-lines.js';
import type { BatchRepo, StoredPricing } from './batch-repo.js';

/** How long the provider may take (its `completion_window`), and the margin after which Nexus gives up on a batch. */
const BATCH_WINDOW_MS = 24 * 3_600_000;
const BATCH_MARGIN_MS = 3_600_000;
/** The first poll of a new batch. */
const FIRST_POLL_MS = 5_000;

/** A path of the Batch API: under its protocol's prefix, `files` or `batches`, an id, and an action. */
const BATCH_PATH = /^((?:openai\/)?(?:v1\/)?)(files|batches)(?:\/([^/]+)(?:\/(content|cancel))?)?$/i;

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

/** Anthropic's Message Batches: `v1/messages/batches`, an id, and `results` or `cancel`. */
const MESSAGE_BATCH_PATH = /^(v1\/messages\/)batches(?:\/([^/]+)(?:\/(results|cancel))?)?$/i;

/** A Message Batches operation (Anthropic), undefined: none. */
function messageBatchPathOf(method: string, route: string): BatchPath | undefined {
  const m = MESSAGE_BATCH_PATH.exec(route);
  if (!m) return undefined;
  const [, prefix, id, actionName] = m;
  const action = actionName?.toLowerCase() as 'results' | 'cancel' | undefined;
  const at = { prefix: prefix!, resource: 'batches' as const, id, action, inline: true };
  if (!id) return method === 'POST' ? { ...at, operation: 'create' } : method === 'GET' ? { ...at, operation: 'list' } : undefined;
  if (action === 'cancel') return method === 'POST' ? { ...at, operation: 'cancel' } : undefined;
  if (action === 'results') return method === 'GET' ? { ...at, operation: 'results' } : undefined;
  if (method === 'GET') return { ...at, operation: 'read' };
  return method === 'DELETE' ? { ...at, operation: 'results' } : undefined;
}

/** The Batch API operation a call is, on an OpenAI, Azure OpenAI or Anthropic connection; undefined: any other call. */
export function batchPathOf(protocol: Protocol, method: string, route: string): BatchPath | undefined {
  if (protocol.profile === 'anthropic') return messageBatchPathOf(method, route);
  if (protocol.bodyShape !== 'openai') return undefined;
  const m = BATCH_PATH.exec(route);
  if (!m) return undefined;
  const [, prefix, resourceName, id, actionName] = m;
  const resource = resourceName!.toLowerCase() as BatchPath['resource'];
  const action = actionName?.toLowerCase() as BatchPath['action'];
  const at = { prefix: prefix!, resource, id, action };
  if (resource === 'files') {
    if (!id) return method === 'POST' ? { ...at, operation: 'upload' } : undefined;
    if (action === 'cancel') return undefined;
    if (method === 'GET' || (method === 'DELETE' && !action)) return { ...at, operation: 'file' };
    return undefined;
  }
  if (!id) return method === 'POST' ? { ...at, operation: 'create' } : method === 'GET' ? { ...at, operation: 'list' } : undefined;
  if (action === 'cancel') return method === 'POST' ? { ...at, operation: 'cancel' } : undefined;
  if (!action && method === 'GET') return { ...at, operation: 'read' };
  return undefined;
}

export interface BatchGatewayDeps {
  repo: BatchRepo;
  quotaRepo: QuotaRepo;
  meter: CallMeter;
  pools: ReturnType<typeof createUpstreamPools>;
  secretBox: SecretBox;
  clock: Clock;
  bodyLimitBytes: number;
}

/** One Batch API request, its key's access and connection known. */
export interface BatchRequest {
  req: IncomingMessage;
  res: ServerResponse;
  locals: RequestLocals;
  entry: CacheEntry;
  auth: AuthRow;
  protocol: Protocol;
  target: GatewayTarget;
  path: BatchPath;
}

/**
 * A request this module does not meter, handed back to the gateway's flow, where its passthrough class decides: an
 * upload whose purpose is not `batch`, or, where the workspace or the plan lets its class through, a batch or file
 * Nexus did not see. `body`: what was read of its body (none: the flow reads it).
 */
export interface Fallback {
  body?: Sendable;
}

/** What a batch is admitted at: its requests, its bound in units and in tokens, and the pricing of its models. */
interface Bound {
  requests: number;
  units: bigint;
  tokens: bigint;
  pricing: Record<string, StoredPricing>;
}

/** What the upstream answered: its status, headers and body (a stream). */
interface Answer {
  status: number;
  contentType: string | undefined;
  body: Readable;
}

const readJson = async (body: Readable): Promise<Record<string, unknown> | undefined> => {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  try {
    const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
};

const stringOr = (value: unknown): string | null => (typeof value === 'string' && value ? value : null);

const notFound = (what: 'batch' | 'file') =>
  new AppError(what === 'batch' ? 'batch_not_found' : 'file_not_found', `No ${what} with that id`, { param: `${what}_id` });

/** The pricing a batch keeps of a model (its text multipliers). */
function storedPricing(bound: BatchFileBound): Record<string, StoredPricing> {
  return Object.fromEntries(
    Object.entries(bound.pricing).map(([model, p]) => [
      model,
      { rule: p.rule, input: `${p.inputMultiplierPpm}`, cached: `${p.cachedInputMultiplierPpm}`, output: `${p.outputMultiplierPpm}` },
    ]),
  );
}

export function createBatchGateway(deps: BatchGatewayDeps) {
  const { repo, quotaRepo, meter, pools, secretBox, clock } = deps;

  /** Sends a request upstream on the call's connection, at `path` under its base URL (with the call's query). */
  async function upstream(r: BatchRequest, method: string, path: string, body: Buffer | Readable | null, length: number): Promise<Answer> {
    const up = upstreamOf(r.entry, r.auth, secretBox);
    const base = up.baseUrl;
    const full = `${base.pathname.replace(/\/$/, '')}/${path}${upstreamSearch(r.target.search)}`;
    const headers = upstreamHeaders(r.req.rawHeaders, r.protocol, up.apiKey, length);
    try {
      const answer = await pools.get(base).request({ method, path: full, headers, body, headersTimeout: 120_000 });
      const type = answer.headers['content-type'];
      return { status: answer.statusCode, contentType: Array.isArray(type) ? type[0] : type, body: answer.body };
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw new AppError('upstream_unavailable', 'The provider did not answer');
    }
  }

  /** The answer's head: the upstream's status and type, and Nexus's headers (a batch's requests are metered: docs/batches.md). */
  function answerHead(r: BatchRequest, status: number, contentType: string | undefined): void {
    const headers: Record<string, string> = { 'x-nexus-request-id': r.locals.requestId, 'x-nexus-metering-status': 'metered' };
    const view = meter.quotaView(r.auth, clock.now());
    if (view) {
      headers['x-nexus-quota-remaining'] = view.remaining.toString();
      headers['x-nexus-quota-reset'] = view.reset.toISOString();
    }
    if (contentType) headers['content-type'] = contentType;
    r.res.writeHead(status, headers);
  }

  /** The upstream's answer passed back as it came (a file's content streamed). */
  async function passBack(r: BatchRequest, answer: Answer): Promise<void> {
    answerHead(r, answer.status, answer.contentType);
    for await (const chunk of answer.body) if (!r.res.write(chunk)) await new Promise((ok) => r.res.once('drain', ok));
    r.res.end();
  }

  function sendJson(r: BatchRequest, status: number, body: unknown): void {
    answerHead(r, status, 'application/json');
    r.res.end(JSON.stringify(body));
  }

  function refuse(r: Pick<BatchRequest, 'res' | 'locals' | 'auth' | 'protocol'>, err: unknown): void {
    const now = clock.now();
    sendError(r.res, {
      locals: r.locals,
      err,
      metered: true,
      quota: meter.quotaView(r.auth, now),
      rate: meter.rateView(r.auth, now),
      now: now.getTime(),
      protocol: r.protocol,
    });
  }

  const owned = (r: BatchRequest) => ({ connectionId: r.auth.connection_id!, accessId: r.auth.workspace_access_id });

  /**
   * POST files: the multipart body read as it comes, its file's lines checked (batch-lines.ts) while its bytes are
   * spooled. A file whose purpose is not `batch` is handed back (the caller's passthrough decides); a batch's file,
   * once every line passed, goes upstream, and its bound is kept beside the provider's id.
   */
  async function upload(r: BatchRequest, boundary: string): Promise<Fallback | undefined> {
    const { auth } = r;
    const lines = new BatchLines(
      { protocol: protocolOf(r.protocol.bodyShape), maxOutputTokens: auth.max_output_tokens ?? 0, policy: meter.modelPolicy(auth) },
      false,
    );
    let started = false;
    const limit = Math.max(deps.bodyLimitBytes, MAX_BATCH_FILE_BYTES + (1 << 20));
    const sent = await readUpload(r.req, limit, boundary, (bytes, fieldsBefore) => {
      // Known to be a batch's before its file: its first bad line refuses the upload at once.
      if (!started) lines.strict = fieldsBefore.purpose === 'batch';
      started = true;
      lines.push(bytes);
    });
    if (sent.form.fields.purpose !== 'batch') return { body: sent };
    try {
      if (!auth.period_id) throw new AppError('quota_insufficient', 'The access has no current quota period');
      const bound = lines.end();
      const answer = await upstream(r, 'POST', r.target.providerPath, sent.open(), sent.length);
      if (answer.status < 200 || answer.status >= 300) return void (await passBack(r, answer));
      const file = await readJson(answer.body);
      const fileId = stringOr(file?.id);
      if (!file || !fileId) throw new AppError('upstream_unavailable', 'The provider answered the upload without a file id');
      await repo.insertFile({
        id: newId(),
        workspace_id: auth.workspace_id,
        workspace_access_id: auth.workspace_access_id,
        provider_connection_id: auth.connection_id!,
        upstream_file_id: fileId,
        requests: bound.requests,
        bound_units: bound.units,
        bound_tokens: bound.tokens,
        pricing: storedPricing(bound),
        created_at: clock.now(),
      });
      sendJson(r, answer.status, file);
      return undefined;
    } finally {
      await sent.dispose();
    }
  }

  /** POST batches: admitted at its file's bound (budget, one lease, rate limits), then created upstream. */
  async function create(r: BatchRequest): Promise<Fallback | undefined> {
    // An inline batch names no file: its requests are bounded here.
    const { auth } = r;
    const raw = await readBody(r.req, deps.bodyLimitBytes);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
    } catch {
      throw new AppError('invalid_json', 'The request body is not JSON');
    }
    if (r.path.inline) return admitAndCreate(r, raw, inlineBound(r, body), undefined);
    const fileId = stringOr(body?.input_file_id);
    if (!fileId) throw new AppError('invalid_parameter', 'input_file_id is required', { param: 'input_file_id' });
    const file = await repo.findFile(owned(r), fileId);
    // A file Nexus did not see: unmetered where the workspace or the plan lets batches through, else refused.
    if (!file && letsThrough(auth, 'batches')) return { body: raw };
    if (!file) {
      throw new AppError(
        'batch_file_unknown',
        `The file '${fileId}' was not uploaded through Nexus by this access (POST files, purpose batch): a batch is admitted at the bound Nexus read from its file`,
        { param: 'input_file_id' },
      );
    }
    const bound = { requests: file.requests, units: BigInt(file.bound_units), tokens: BigInt(file.bound_tokens), pricing: file.pricing };
    return admitAndCreate(r, raw, bound, file.id);
  }

  /** An inline batch's requests (Anthropic's `requests: [{custom_id, params}]`) checked and bounded as a file's lines are. */
  function inlineBound(r: BatchRequest, body: Record<string, unknown>): Bound {
    const requests = body?.requests;
    if (!Array.isArray(requests) || requests.length === 0)
      throw new AppError('invalid_parameter', 'requests must be a non-empty array', { param: 'requests' });
    const { auth } = r;
    const lines = new BatchLines(
      { protocol: r.protocol, maxOutputTokens: auth.max_output_tokens ?? 0, policy: meter.modelPolicy(auth) },
      true,
      (n) => `requests[${n - 1}]`,
    );
    for (const request of requests as Record<string, unknown>[]) {
      const line = { custom_id: request?.custom_id, method: 'POST', url: '/v1/messages', body: request?.params };
      lines.push(Buffer.from(JSON.stringify(line) + '\n'));
    }
    const bound = lines.end();
    return { requests: bound.requests, units: bound.units, tokens: bound.tokens, pricing: storedPricing(bound) };
  }

  /**
   * A batch admitted at its bound (the budget, one lease, the rate limits) and created upstream; its rows written once
   * the provider answered (an inline batch's bound beside its id, `fileId` undefined). Any refusal or failure releases
   * the lease at once.
   */
  async function admitAndCreate(r: BatchRequest, raw: Buffer, file: Bound, fileId: string | undefined): Promise<undefined> {
    const { auth } = r;
    const now = clock.now();
    assertBudget(auth, now);
    // The plan may have changed since the upload: its models are asked again.
    const policy = meter.modelPolicy(auth);
    for (const model of Object.keys(file.pricing)) assertModelAllowed(policy, model);
    const reset = auth.period_end;
    if (!auth.period_id || !reset) throw new AppError('quota_insufficient', 'The access has no current quota period');
    const bound = file.units;
    const leaseId = newId();
    const expiresAt = new Date(now.getTime() + BATCH_WINDOW_MS + BATCH_MARGIN_MS);
    const held = await quotaRepo.acquireLease({
      id: leaseId,
      workspaceId: auth.workspace_id,
      accessId: auth.workspace_access_id,
      periodId: auth.period_id,
      need: bound,
      want: bound,
      share: 1,
      requestId: r.locals.requestId,
      now,
      expiresAt,
    });
    if (held.held === null) {
      throw new AppError('quota_insufficient', `This batch may need up to ${bound} units; ${held.available} are available`, {
        reset_at: reset.toISOString(),
      });
    }
    let created = false;
    try {
      const admitted = new Admitted();
      await admitRate(meter, { auth, admitted }, file.tokens);
      // Counted against the minute's requests and tokens; no slot is held while the provider runs it.
      if (admitted.rateTicket) meter.rates.settle(admitted.rateTicket, admitted.rateTicket.tokens);
      const answer = await upstream(r, 'POST', r.target.providerPath, raw, raw.length);
      if (answer.status < 200 || answer.status >= 300) return void (await passBack(r, answer));
      const batch = await readJson(answer.body);
      const batchId = stringOr(batch?.id);
      if (!batch || !batchId) throw new AppError('upstream_unavailable', 'The provider answered the batch without an id');
      const models = Object.keys(file.pricing);
      const batchFileId = fileId ?? newId();
      if (!fileId) {
        await repo.insertFile({
          id: batchFileId,
          workspace_id: auth.workspace_id,
          workspace_access_id: auth.workspace_access_id,
          provider_connection_id: auth.connection_id!,
          upstream_file_id: `inline:${batchId}`,
          requests: file.requests,
          bound_units: file.units,
          bound_tokens: file.tokens,
          pricing: file.pricing,
          created_at: now,
        });
      }
      await repo.insertBatch({
        id: newId(),
        workspace_id: auth.workspace_id,
        workspace_access_id: auth.workspace_access_id,
        provider_connection_id: auth.connection_id!,
        inference_key_id: auth.key_id,
        plan_id: auth.plan_id,
        batch_file_id: batchFileId,
        upstream_batch_id: batchId,
        path_prefix: r.path.prefix,
        search: r.target.search,
        request_id: r.locals.requestId,
        endpoint: r.target.providerPath,
        model: models.length === 1 ? models[0]! : '',
        invocation_id: newId(),
        lease_id: leaseId,
        quota_period_id: auth.period_id,
        status: 'OPEN',
        upstream_status: stringOr(batch.status) ?? stringOr(batch.processing_status) ?? 'validating',
        requests: file.requests,
        bound_units: bound,
        output_file_id: null,
        error_file_id: null,
        created_at: now,
        expires_at: expiresAt,
        next_poll_at: new Date(now.getTime() + FIRST_POLL_MS),
      });
      created = true;
      sendJson(r, answer.status, withGatewayUrls(r, batch));
      return undefined;
    } finally {
      // Not created: what the lease held returns at once.
      if (!created) await quotaRepo.releaseLease(leaseId, clock.now());
    }
  }

  /** GET batches: the provider's list, of this access's batches only. */
  async function list(r: BatchRequest): Promise<Fallback | undefined> {
    if (letsThrough(r.auth, 'batches')) return {};
    const answer = await upstream(r, 'GET', r.target.providerPath, null, 0);
    if (answer.status !== 200) return void (await passBack(r, answer));
    const page = await readJson(answer.body);
    const mine = await repo.batchIds(owned(r));
    const data = Array.isArray(page?.data) ? (page.data as Record<string, unknown>[]) : [];
    const kept = data.filter((b) => typeof b?.id === 'string' && mine.has(b.id));
    sendJson(r, 200, { ...page, data: kept, first_id: kept[0]?.id ?? null, last_id: kept.at(-1)?.id ?? null });
    return undefined;
  }

  /** GET batches/{id} and POST batches/{id}/cancel: this access's batch only; the files its answer names become readable. */
  async function readOrCancel(r: BatchRequest, method: 'GET' | 'POST'): Promise<Fallback | undefined> {
    const batch = await repo.findBatch(owned(r), r.path.id!);
    if (!batch && letsThrough(r.auth, 'batches')) return {};
    if (!batch) throw notFound('batch');
    const body = method === 'POST' ? await readBody(r.req, deps.bodyLimitBytes) : null;
    const answer = await upstream(r, method, r.target.providerPath, body, body?.length ?? 0);
    if (answer.status !== 200) return void (await passBack(r, answer));
    const read = await readJson(answer.body);
    await repo.noteFiles(batch.id, stringOr(read?.output_file_id), stringOr(read?.error_file_id));
    sendJson(r, 200, read && withGatewayUrls(r, read));
    return undefined;
  }

  /** An inline batch's results, or its DELETE: for its access only. */
  async function results(r: BatchRequest): Promise<Fallback | undefined> {
    const batch = await repo.findBatch(owned(r), r.path.id!);
    if (!batch && letsThrough(r.auth, 'batches')) return {};
    if (!batch) throw notFound('batch');
    await passBack(r, await upstream(r, r.req.method!, r.target.providerPath, null, 0));
    return undefined;
  }

  /**
   * A batch as the caller gets it: its `results_url` (Anthropic's, where the SDK reads its results) made the gateway's,
   * so the results are read through Nexus, for the batch's access only.
   */
  function withGatewayUrls(r: BatchRequest, batch: Record<string, unknown>): Record<string, unknown> {
    if (typeof batch.results_url !== 'string' || typeof batch.id !== 'string') return batch;
    const host = r.req.headers.host ?? '127.0.0.1';
    const scheme = (r.req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
    const base = `${scheme}://${host}/providers/${r.target.connectionId}/${r.path.prefix}batches/${encodeURIComponent(batch.id)}/results`;
    return { ...batch, results_url: base };
  }

  /** GET files/{id}[/content], DELETE files/{id}: a file this access uploaded, or one its batches wrote. */
  async function file(r: BatchRequest): Promise<Fallback | undefined> {
    if (!(await repo.ownsFile(owned(r), r.path.id!))) {
      if (letsThrough(r.auth, 'files')) return {};
      throw notFound('file');
    }
    const answer = await upstream(r, r.req.method!, r.target.providerPath, null, 0);
    await passBack(r, answer);
    return undefined;
  }

  return {
    /**
     * A Batch API request answered (a refusal in the connection's error shape), or handed back (Fallback) for the
     * gateway's passthrough to decide.
     */
    async handle(r: BatchRequest, boundary: string | undefined): Promise<Fallback | undefined> {
      try {
        switch (r.path.operation) {
          case 'upload':
            // A file that is not multipart is no batch's: its passthrough class decides.
            return boundary === undefined ? {} : await upload(r, boundary);
          case 'create':
            return await create(r);
          case 'list':
            return await list(r);
          case 'read':
            return await readOrCancel(r, 'GET');
          case 'cancel':
            return await readOrCancel(r, 'POST');
          case 'file':
            return await file(r);
          case 'results':
            return await results(r);
        }
      } catch (err) {
        if (r.res.headersSent) r.res.destroy();
        else refuse(r, err);
        return undefined;
      }
    },
  };
}
