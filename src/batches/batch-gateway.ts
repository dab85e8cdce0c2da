/**
 * OpenAI's Batch API through the gateway, and Azure OpenAI's (docs/batches.md): the input file read line by line as it
 * arrives (batch-lines.ts) and sent once every line passed; a batch admitted on one quota lease at its file's bound;
 * its reads, its list and its cancel passed through for the access that made it only (another access's id answers
 * 404, as an unknown one does). Its settlement is batch-settlement.ts's.
 */
import { AppError, toAppError } from '../errors.js';
import { newId } from '../ids.js';
import { protocolOf } from '../protocols/index.js';
import type { Protocol } from '../protocols/protocol.js';
import { letsThrough, notLetThrough } from '../gateway/admission.js';
import { readBody } from '../gateway/client-request.js';
import { readUpload } from '../gateway/upload.js';
import { admitAndCreate, inlineBound, storedPricing } from './batch-admit.js';
import { BatchLines, MAX_BATCH_FILE_BYTES } from './batch-lines.js';
import {
  notFound,
  owned,
  passBack,
  readJson,
  refuse,
  sendJson,
  stringOr,
  upstream,
  withGatewayUrls,
  type BatchGatewayDeps,
  type BatchPath,
  type BatchRequest,
  type Fallback,
} from './batch-upstream.js';

/** A path of the Batch API: under its protocol's prefix, `files` or `batches`, an id, and an action. */
const BATCH_PATH = /^((?:openai\/)?(?:v1\/)?)(files|batches)(?:\/([^/]+)(?:\/(content|cancel))?)?$/i;

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
/**
 * POST files: the multipart body read as it comes, its file's lines checked (batch-lines.ts) while its bytes are
 * spooled. A file whose purpose is not `batch` is handed back (the caller's passthrough decides); a batch's file,
 * once every line passed, goes upstream, and its bound is kept beside the provider's id. Where uploads of other
 * purposes are not let through (passthrough class `files`), an upload neither path could take is refused as soon as
 * that is known (uploadRefusal), not once its body is read: its refusal's drain (REFUSED_BODY_DRAIN) lets the
 * client read the answer.
 */
async function upload(deps: BatchGatewayDeps, r: BatchRequest, boundary: string): Promise<Fallback | undefined> {
  const { auth } = r;
  const passes = letsThrough(auth, 'files');
  const limit = Math.max(deps.bodyLimitBytes, MAX_BATCH_FILE_BYTES + (1 << 20));
  const declared = Number(r.req.headers['content-length']);
  // Known before the body: a body over the limit, or (nothing else let through) an access no batch can be made on.
  if (declared > limit) throw new AppError('payload_too_large', 'The request body is larger than the limit');
  if (!passes && !auth.period_id) throw uploadRefusal(r, undefined, 'the access has no current quota period');
  const lines = new BatchLines(
    { protocol: protocolOf(r.protocol.bodyShape), maxOutputTokens: auth.max_output_tokens ?? 0, policy: deps.meter.modelPolicy(auth) },
    false,
  );
  let started = false;
  const sent = await readUpload(r.req, limit, boundary, (bytes, fieldsBefore) => {
    if (!started) {
      const purpose = fieldsBefore.purpose;
      // Its purpose read before its file: another purpose's upload is refused before its file is read.
      if (!passes && purpose !== undefined && purpose !== 'batch') throw uploadRefusal(r, purpose);
      // Known to be a batch's before its file: its first bad line refuses the upload at once.
      lines.strict = purpose === 'batch';
    }
    started = true;
    lines.push(bytes);
    // Its purpose not read yet, and its file no batch's: refused either way, at once.
    if (!passes && lines.refusal) throw uploadRefusal(r, undefined, lines.refusal);
  });
  if (sent.form.fields.purpose !== 'batch') return { body: sent };
  try {
    if (!auth.period_id) throw new AppError('quota_insufficient', 'The access has no current quota period');
    const bound = lines.end();
    const answer = await upstream(deps, r, 'POST', r.target.providerPath, sent.open(), sent.length);
    if (answer.status < 200 || answer.status >= 300) return void (await passBack(deps, r, answer));
    const file = await readJson(answer.body);
    const fileId = stringOr(file?.id);
    if (!file || !fileId) throw new AppError('upstream_unavailable', 'The provider answered the upload without a file id');
    await deps.repo.insertFile({
      id: newId(),
      workspace_id: auth.workspace_id,
      workspace_access_id: auth.workspace_access_id,
      provider_connection_id: auth.connection_id!,
      upstream_file_id: fileId,
      requests: bound.requests,
      bound_units: bound.units,
      bound_tokens: bound.tokens,
      pricing: storedPricing(bound),
      created_at: deps.clock.now(),
    });
    sendJson(deps, r, answer.status, file);
    return undefined;
  } finally {
    await sent.dispose();
  }
}

/**
 * The refusal of an upload that neither path takes, where uploads other than a batch's are not let through: one
 * whose `purpose` is not `batch` (409), or, its purpose not read yet, one no batch's file can be: its line refused
 * (400, naming it), or the access's (409).
 */
function uploadRefusal(r: BatchRequest, purpose: string | undefined, why?: AppError | string): AppError {
  const what = `POST ${r.target.providerPath}`;
  if (purpose !== undefined) return notLetThrough(r.auth, `${what} with purpose '${purpose.slice(0, 64)}'`, 'files');
  const other = `an upload of another purpose than 'batch' (passthrough class 'files') is not let through on this access`;
  if (why instanceof AppError) return new AppError(why.code, `${why.message} (${other}, and this file is no batch's)`, why.extras);
  const refused = notLetThrough(r.auth, what, 'files');
  return new AppError(refused.code, `${refused.message}; and no batch's file can be uploaded: ${why}`, refused.extras);
}

/** POST batches: admitted at its file's bound (budget, one lease, rate limits), then created upstream. */
async function create(deps: BatchGatewayDeps, r: BatchRequest): Promise<Fallback | undefined> {
  // An inline batch names no file: its requests are bounded here.
  const { auth } = r;
  const raw = await readBody(r.req, deps.bodyLimitBytes);
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new AppError('invalid_json', 'The request body is not JSON');
  }
  if (r.path.inline) return admitAndCreate(deps, r, { raw, body }, inlineBound(deps, r, body), undefined);
  const fileId = stringOr(body?.input_file_id);
  if (!fileId) throw new AppError('invalid_parameter', 'input_file_id is required', { param: 'input_file_id' });
  const file = await deps.repo.findFile(owned(r), fileId);
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
  return admitAndCreate(deps, r, { raw, body }, bound, file.id);
}

/** The paging a list reads from its query (OpenAI's `after`; Anthropic's `after_id`, `before_id`) and its limit. */
const PAGING = new Set(['after', 'after_id', 'before_id', 'limit']);
/** The batches of a page read from the provider at once. */
const LIST_READS = 16;

/**
 * GET batches: a page of this access's batches, newest first, its rows Nexus's (paged by the cursor the caller's SDK
 * sends: `after`, or Anthropic's `after_id` and `before_id`), each read from the provider as it stands. A page is as
 * full as the limit asks while the access has batches left (`has_more`), whatever other accesses made between them.
 */
async function list(deps: BatchGatewayDeps, r: BatchRequest): Promise<Fallback | undefined> {
  if (letsThrough(r.auth, 'batches')) return {};
  const query = new URLSearchParams(r.target.search);
  const most = r.path.inline ? 1000 : 100;
  const asked = query.get('limit');
  const limit = asked === null ? 20 : Number(asked);
  if (!Number.isInteger(limit) || limit < 1 || limit > most)
    throw new AppError('invalid_parameter', `limit must be an integer from 1 to ${most}`, { param: 'limit' });
  const before = query.get('before_id') ?? undefined;
  const after = query.get('after') ?? query.get('after_id') ?? undefined;
  const page = await deps.repo.page(owned(r), { after, before, limit });
  // Each batch read where its list was asked (Azure's api-version kept), without the list's paging.
  const kept = [...query].filter(([name]) => !PAGING.has(name));
  const search = kept.length ? `?${new URLSearchParams(kept)}` : '';
  const at = { ...r, target: { ...r.target, search } };
  const data: Record<string, unknown>[] = [];
  for (let i = 0; i < page.ids.length; i += LIST_READS) {
    const read = page.ids
      .slice(i, i + LIST_READS)
      .map((id) => upstream(deps, at, 'GET', `${r.path.prefix}batches/${encodeURIComponent(id)}`, null, 0));
    for (const answer of await Promise.all(read)) {
      if (answer.status !== 200) return void (await passBack(deps, r, answer));
      const batch = await readJson(answer.body);
      if (batch) data.push(withGatewayUrls(r, batch));
    }
  }
  const ends = { first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: page.more };
  sendJson(deps, r, 200, r.path.inline ? { data, ...ends } : { object: 'list', data, ...ends });
  return undefined;
}

/** GET batches/{id} and POST batches/{id}/cancel: this access's batch only; the files its answer names become readable. */
async function readOrCancel(deps: BatchGatewayDeps, r: BatchRequest, method: 'GET' | 'POST'): Promise<Fallback | undefined> {
  const batch = await deps.repo.findBatch(owned(r), r.path.id!);
  if (!batch && letsThrough(r.auth, 'batches')) return {};
  if (!batch) throw notFound('batch');
  const body = method === 'POST' ? await readBody(r.req, deps.bodyLimitBytes) : null;
  const answer = await upstream(deps, r, method, r.target.providerPath, body, body?.length ?? 0);
  if (answer.status !== 200) return void (await passBack(deps, r, answer));
  const read = await readJson(answer.body);
  await deps.repo.noteFiles(batch.id, stringOr(read?.output_file_id), stringOr(read?.error_file_id));
  sendJson(deps, r, 200, read && withGatewayUrls(r, read));
  return undefined;
}

/** An inline batch's results, or its DELETE: for its access only. */
async function results(deps: BatchGatewayDeps, r: BatchRequest): Promise<Fallback | undefined> {
  const batch = await deps.repo.findBatch(owned(r), r.path.id!);
  if (!batch && letsThrough(r.auth, 'batches')) return {};
  if (!batch) throw notFound('batch');
  await passBack(deps, r, await upstream(deps, r, r.req.method!, r.target.providerPath, null, 0));
  return undefined;
}

/** GET files/{id}[/content], DELETE files/{id}: a file this access uploaded, or one its batches wrote. */
async function file(deps: BatchGatewayDeps, r: BatchRequest): Promise<Fallback | undefined> {
  if (!(await deps.repo.ownsFile(owned(r), r.path.id!))) {
    if (letsThrough(r.auth, 'files')) return {};
    throw notFound('file');
  }
  await passBack(deps, r, await upstream(deps, r, r.req.method!, r.target.providerPath, null, 0));
  return undefined;
}

/** The operation a Batch API request is, run. */
function run(deps: BatchGatewayDeps, r: BatchRequest, boundary: string | undefined): Promise<Fallback | undefined> {
  switch (r.path.operation) {
    case 'upload':
      // A file that is not multipart is no batch's: its passthrough class decides.
      return boundary === undefined ? Promise.resolve({}) : upload(deps, r, boundary);
    case 'create':
      return create(deps, r);
    case 'list':
      return list(deps, r);
    case 'read':
      return readOrCancel(deps, r, 'GET');
    case 'cancel':
      return readOrCancel(deps, r, 'POST');
    case 'file':
      return file(deps, r);
    case 'results':
      return results(deps, r);
  }
}

/**
 * A Batch API request answered here recorded as an invocation of its own (unmetered, 0 units), so the console's calls
 * show it: all but a batch made, whose invocation is the batch's own, recorded once it is settled.
 */
async function recordOperation(deps: BatchGatewayDeps, r: BatchRequest, startedAt: Date, t0: bigint, refusal: AppError | undefined) {
  const status = r.res.statusCode;
  if (r.path.operation === 'create' && status < 300) return;
  const { auth } = r;
  try {
    await deps.repo.recordOperation({
      id: newId(),
      workspaceId: auth.workspace_id,
      accessId: auth.workspace_access_id,
      connectionId: auth.connection_id!,
      keyId: auth.key_id,
      planId: auth.plan_id,
      requestId: r.locals.requestId,
      method: r.req.method!,
      endpoint: r.target.providerPath.replace(/\/$/, ''),
      status: refusal ? (refusal.status >= 500 ? 'FAILED' : 'REJECTED') : status < 400 ? 'SUCCEEDED' : 'UPSTREAM_ERROR',
      errorCode: refusal?.code ?? null,
      startedAt,
      completedAt: deps.clock.now(),
      latencyMs: Number(process.hrtime.bigint() - t0) / 1e6,
      upstreamId: r.path.id ?? null,
    });
  } catch (err) {
    deps.logger.warn({ msg: 'a Batch API request was not recorded', requestId: r.locals.requestId, error: (err as Error).message });
  }
}

export function createBatchGateway(deps: BatchGatewayDeps) {
  return {
    /**
     * A Batch API request answered (a refusal in the connection's error shape), or handed back (Fallback) for the
     * gateway's passthrough to decide.
     */
    async handle(r: BatchRequest, boundary: string | undefined): Promise<Fallback | undefined> {
      const startedAt = deps.clock.now();
      const t0 = process.hrtime.bigint();
      let refusal: AppError | undefined;
      try {
        const other = await run(deps, r, boundary);
        if (other) return other;
      } catch (err) {
        refusal = toAppError(err);
        if (r.res.headersSent) r.res.destroy();
        else refuse(deps, r, err);
      }
      await recordOperation(deps, r, startedAt, t0, refusal);
      return undefined;
    },
  };
}
