/**
 * A batch admitted (docs/batches.md): at its bound (its file's, or its inline requests'), on the budget, one quota
 * lease for the whole batch and the rate limits, then created upstream and its rows written once the provider answered.
 */
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import { Admitted, admitRate, assertBudget, assertModelAllowed } from '../gateway/admission.js';
import { BatchLines, type BatchFileBound } from './batch-lines.js';
import type { StoredPricing } from './batch-repo.js';
import {
  passBack,
  readJson,
  sendJson,
  stringOr,
  upstream,
  withGatewayUrls,
  type BatchGatewayDeps,
  type BatchRequest,
} from './batch-upstream.js';

/** How long the provider may take (its `completion_window`), and the margin after which Nexus gives up on a batch. */
const BATCH_WINDOW_MS = 24 * 3_600_000;
const BATCH_MARGIN_MS = 3_600_000;
/** The first poll of a new batch. */
const FIRST_POLL_MS = 5_000;

/** What a batch is admitted at: its requests, its bound in units and in tokens, and the pricing of its models. */
export interface Bound {
  requests: number;
  units: bigint;
  tokens: bigint;
  pricing: Record<string, StoredPricing>;
}

/** The pricing a batch keeps of a model (its text multipliers). */
export function storedPricing(bound: BatchFileBound): Record<string, StoredPricing> {
  return Object.fromEntries(
    Object.entries(bound.pricing).map(([model, p]) => [
      model,
      { rule: p.rule, input: `${p.inputMultiplierPpm}`, cached: `${p.cachedInputMultiplierPpm}`, output: `${p.outputMultiplierPpm}` },
    ]),
  );
}

/** An inline batch's requests (Anthropic's `requests: [{custom_id, params}]`) checked and bounded as a file's lines are. */
export function inlineBound(deps: BatchGatewayDeps, r: BatchRequest, body: Record<string, unknown>): Bound {
  const requests = body?.requests;
  if (!Array.isArray(requests) || requests.length === 0)
    throw new AppError('invalid_parameter', 'requests must be a non-empty array', { param: 'requests' });
  const { auth } = r;
  const lines = new BatchLines(
    { protocol: r.protocol, maxOutputTokens: auth.max_output_tokens ?? 0, policy: deps.meter.modelPolicy(auth) },
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

/** How long a batch's row may stay PENDING (the provider asked, no answer yet) before the settlement job looks for it. */
const PENDING_MS = 5 * 60_000;
/** The metadata key a batch is made with upstream (OpenAI's), naming its row: how a batch whose answer was lost is found. */
export const METADATA_KEY = 'nexus_batch';
/** OpenAI's limit on a batch's metadata keys. */
const MAX_METADATA_KEYS = 16;

/** A file's batch as it is sent: the caller's body, its metadata naming the row (where it has room for one more key). */
function sentBody(body: Record<string, unknown>, raw: Buffer, rowId: string): Buffer {
  const metadata = body.metadata ?? {};
  if (typeof metadata !== 'object' || Array.isArray(metadata) || Object.keys(metadata).length >= MAX_METADATA_KEYS) return raw;
  return Buffer.from(JSON.stringify({ ...body, metadata: { ...metadata, [METADATA_KEY]: rowId } }));
}

/**
 * A batch admitted at its bound (the budget, one lease, the rate limits) and created upstream (an inline batch's
 * bound beside its row, `fileId` undefined). Its row is written PENDING before the provider is asked, and made OPEN
 * with the provider's id once it answers: a process that dies between the two leaves the row to the settlement job,
 * which finds the batch at the provider (by its metadata) or releases its lease (batch-settlement.ts). A refusal, or
 * the provider's, releases the lease at once; a request the provider may have taken without answering leaves its
 * row PENDING, to be found so.
 */
export async function admitAndCreate(
  deps: BatchGatewayDeps,
  r: BatchRequest,
  request: { raw: Buffer; body: Record<string, unknown> },
  file: Bound,
  fileId: string | undefined,
): Promise<undefined> {
  const { repo, quotaRepo, meter, clock } = deps;
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
  const id = newId();
  /** Where it stands: `unsent`: the provider was not asked; `asked`: it may have made the batch; `answered`: it said. */
  let stage: 'unsent' | 'asked' | 'answered' = 'unsent';
  let opened = false;
  try {
    const admitted = new Admitted();
    await admitRate(meter, { auth, admitted }, file.tokens);
    // Counted against the minute's requests and tokens; no slot is held while the provider runs it.
    if (admitted.rateTicket) meter.rates.settle(admitted.rateTicket, admitted.rateTicket.tokens);
    const models = Object.keys(file.pricing);
    const batchFileId = fileId ?? newId();
    if (!fileId) {
      await repo.insertFile({
        id: batchFileId,
        workspace_id: auth.workspace_id,
        workspace_access_id: auth.workspace_access_id,
        provider_connection_id: auth.connection_id!,
        upstream_file_id: `inline:${id}`,
        requests: file.requests,
        bound_units: file.units,
        bound_tokens: file.tokens,
        pricing: file.pricing,
        created_at: now,
      });
    }
    await repo.insertBatch({
      id,
      workspace_id: auth.workspace_id,
      workspace_access_id: auth.workspace_access_id,
      provider_connection_id: auth.connection_id!,
      inference_key_id: auth.key_id,
      plan_id: auth.plan_id,
      batch_file_id: batchFileId,
      upstream_batch_id: null,
      path_prefix: r.path.prefix,
      search: r.target.search,
      request_id: r.locals.requestId,
      endpoint: r.target.providerPath,
      model: models.length === 1 ? models[0]! : '',
      invocation_id: newId(),
      lease_id: leaseId,
      quota_period_id: auth.period_id,
      status: 'PENDING',
      upstream_status: 'pending',
      requests: file.requests,
      bound_units: bound,
      output_file_id: null,
      error_file_id: null,
      created_at: now,
      expires_at: expiresAt,
      next_poll_at: new Date(now.getTime() + PENDING_MS),
    });
    const sent = r.path.inline ? request.raw : sentBody(request.body, request.raw, id);
    stage = 'asked';
    const answer = await upstream(deps, r, 'POST', r.target.providerPath, sent, sent.length);
    if (answer.status < 200 || answer.status >= 300) {
      stage = 'answered';
      return void (await passBack(deps, r, answer));
    }
    const batch = await readJson(answer.body);
    const batchId = stringOr(batch?.id);
    if (!batch || !batchId) throw new AppError('upstream_unavailable', 'The provider answered the batch without an id');
    const status = stringOr(batch.status) ?? stringOr(batch.processing_status) ?? 'validating';
    await repo.opened(id, batchId, status, new Date(now.getTime() + FIRST_POLL_MS));
    opened = true;
    sendJson(deps, r, answer.status, withGatewayUrls(r, batch));
    return undefined;
  } finally {
    // Not made: what the lease held returns at once (then its row goes). Perhaps made: its row stays PENDING.
    if (!opened && stage !== 'asked') {
      await quotaRepo.releaseLease(leaseId, clock.now());
      await repo.dropPending(id);
    }
  }
}
