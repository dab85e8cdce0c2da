/**
 * A batch settled when its provider ends it (docs/batches.md, "Settlement"): the job `batch-settlement` (src/jobs.ts)
 * claims the OPEN batches due (batch-repo.ts, claimDue: skip locked, so each goes to one process), asks the provider
 * where each stands, and polls it again later, the later the older it is. Once the provider says it ended, its
 * output file and its error file are read line by line as they arrive, and each request that reports usage is
 * charged in chunks (SETTLE_REQUESTS_SQL: once per request, however often the file is read); then the batch is
 * finished: its lease released, its invocation recorded. A batch the provider never ends is finished at its
 * deadline (BATCH_WINDOW_MS + BATCH_MARGIN_MS after it was made).
 */
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { Clock } from '../domain/actor.js';
import type { QuotaRepo } from '../domain/quota/quota-repo.js';
import { chargeUnits, type Multipliers } from '../domain/quota/quota-math.js';
import { openProviderApiKey } from '../domain/provider-connections/provider-secret.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { newId } from '../ids.js';
import type { Logger } from '../observability/logger.js';
import { isProtocolProfile, protocolOf } from '../protocols/index.js';
import type { Protocol } from '../protocols/protocol.js';
import type { createUpstreamPools } from '../gateway/upstreams.js';
import { METADATA_KEY } from './batch-admit.js';
import type { BatchRepo, BatchRow, SettledRequest, StoredPricing } from './batch-repo.js';

/** How long a claimed batch is this process's: past it (the process died), the next claim takes it. */
const CLAIM_MS = 5 * 60_000;
/** The batches one round claims. */
const CLAIMED = 16;
/** The requests charged per statement. */
const CHUNK = 1_000;
/** A batch is polled every tenth of its age, between these. */
const MIN_POLL_MS = 5_000;
const MAX_POLL_MS = 10 * 60_000;
/** How far back a PENDING batch is looked for in the provider's list: before its row's time by this much, at most so many pages. */
const FIND_SKEW_S = 300;
const FIND_PAGES = 10;

/** The provider's statuses of a batch that has ended, and how its invocation is recorded. */
const ENDED: Record<string, { status: string; errorCode: string | null }> = {
  completed: { status: 'SUCCEEDED', errorCode: null },
  cancelled: { status: 'CLIENT_ABORTED', errorCode: 'batch_cancelled' },
  expired: { status: 'FAILED', errorCode: 'batch_expired' },
  failed: { status: 'UPSTREAM_ERROR', errorCode: 'batch_failed' },
};

export interface BatchSettlementDeps {
  repo: BatchRepo;
  quotaRepo: QuotaRepo;
  pools: ReturnType<typeof createUpstreamPools>;
  secretBox: SecretBox;
  clock: Clock;
  logger: Logger;
  /** The requests charged per statement (tests: smaller); default CHUNK. */
  chunk?: number;
  /** Told after each chunk is charged (tests: a process that dies midway throws here). */
  charged?: (batchId: string, requests: number) => void;
}

/** A connection as the poller reaches it. */
interface Reached {
  protocol: Protocol;
  base: URL;
  apiKey: string;
}

/** When a batch `ageMs` old is polled next: a tenth of its age, between MIN_POLL_MS and MAX_POLL_MS. */
function nextPollIn(ageMs: number): number {
  return Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, Math.floor(ageMs / 10)));
}

type Json = Record<string, any>;

/** The `anthropic-version` the poller asks Anthropic's Message Batches with. */
const ANTHROPIC_VERSION = '2023-06-01';

/**
 * The status a batch ended with (a key of ENDED), or undefined while it runs: OpenAI's `status`; Anthropic's
 * `processing_status: ended`, read as cancelled when some of its requests were, else completed.
 */
function endedOf(read: Json | undefined): string | undefined {
  if (typeof read?.status === 'string') return ENDED[read.status] ? read.status : undefined;
  if (read?.processing_status !== 'ended') return undefined;
  return Number(read.request_counts?.canceled ?? 0) > 0 ? 'cancelled' : 'completed';
}

/** The pricing of the model a request was answered by: the file's model it was asked as (the longest that prefixes it), else the dearest. */
function pricingFor(pricing: Record<string, StoredPricing>, answered: string | null): [string, StoredPricing] {
  const models = Object.keys(pricing);
  let found: string | undefined;
  for (const m of models) if (answered && (answered === m || answered.startsWith(m)) && (!found || m.length > found.length)) found = m;
  // A model the file did not name (an alias the provider resolved otherwise): charged at its dearest, never less.
  found ??= models.reduce((a, b) => (BigInt(pricing[b]!.output) > BigInt(pricing[a]!.output) ? b : a));
  return [found, pricing[found]!];
}

const multipliersOf = (p: StoredPricing): Multipliers => ({
  inputMultiplierPpm: BigInt(p.input),
  cachedInputMultiplierPpm: BigInt(p.cached),
  outputMultiplierPpm: BigInt(p.output),
});

async function json(body: Readable): Promise<Json | undefined> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json;
  } catch {
    return undefined;
  }
}

/** A line of an output (or error) file as a request to charge; undefined: it reports no usage (it failed, or is no JSON). */
function requestOf(line: string, pricing: Record<string, StoredPricing>, at: Reached): SettledRequest | undefined {
  let parsed: Json;
  try {
    parsed = JSON.parse(line) as Json;
  } catch {
    return undefined;
  }
  const customId = parsed?.custom_id;
  // OpenAI's output line: `response.body`; Anthropic's result: `result.message` when it succeeded.
  const body = (parsed?.response?.body ?? (parsed?.result?.type === 'succeeded' ? parsed.result.message : undefined)) as Json | undefined;
  if (typeof customId !== 'string' || !body || typeof body !== 'object') return undefined;
  const usage = at.protocol.usageOf(body.usage);
  if (!usage) return undefined;
  const model = typeof body.model === 'string' ? body.model : null;
  const [requested, price] = pricingFor(pricing, model);
  return {
    custom_id: customId,
    request_id: newId(),
    usage_id: newId(),
    units: `${chargeUnits(usage, multipliersOf(price))}`,
    input_tokens: `${usage.inputTokens}`,
    cached_tokens: `${usage.cachedInputTokens}`,
    output_tokens: `${usage.outputTokens}`,
    reasoning_tokens: usage.reasoningTokens === undefined ? null : `${usage.reasoningTokens}`,
    model,
    requested_model: requested,
    model_rule: price.rule,
    input_ppm: price.input,
    cached_ppm: price.cached,
    output_ppm: price.output,
  };
}

export function createBatchSettlement(deps: BatchSettlementDeps) {
  const { repo, quotaRepo, pools, secretBox, clock, logger } = deps;
  const chunk = deps.chunk ?? CHUNK;

  async function reach(b: BatchRow): Promise<Reached | undefined> {
    const c = await repo.connection(b.provider_connection_id);
    if (!c || !isProtocolProfile(c.protocol_profile)) return undefined;
    const apiKey = openProviderApiKey(secretBox, { id: c.id, api_key_ciphertext: c.api_key_ciphertext, api_key_key_id: c.api_key_key_id });
    return { protocol: protocolOf(c.protocol_profile), base: new URL(c.base_url), apiKey };
  }

  /** A GET of the batch's API (`path` after its prefix), its answer's status and body. */
  async function get(b: BatchRow, at: Reached, path: string): Promise<{ status: number; body: Readable }> {
    const headers: string[] = ['accept-encoding', 'identity'];
    at.protocol.authHeaders(headers, at.apiKey);
    if (at.protocol.profile === 'anthropic') headers.push('anthropic-version', ANTHROPIC_VERSION);
    const query = b.search.replace(/^\?/, '');
    const full = `${at.base.pathname.replace(/\/$/, '')}/${b.path_prefix}${path}${query ? `${path.includes('?') ? '&' : '?'}${query}` : ''}`;
    const answer = await pools.get(at.base).request({ method: 'GET', path: full, headers, headersTimeout: 120_000, bodyTimeout: 300_000 });
    return { status: answer.statusCode, body: answer.body };
  }

  /** A file of the batch (`path` after its prefix) read as it arrives, its requests charged chunk by chunk. */
  async function settleFile(b: BatchRow, at: Reached, path: string, pricing: Record<string, StoredPricing>): Promise<void> {
    const answer = await get(b, at, path);
    if (answer.status !== 200) {
      await json(answer.body);
      throw new Error(`the provider answered ${answer.status} for the batch's ${path}`);
    }
    let rows: SettledRequest[] = [];
    const flush = async () => {
      if (!rows.length) return;
      const sent = rows;
      rows = [];
      const charged = await repo.settleRequests(b.id, sent, clock.now());
      deps.charged?.(b.id, charged.requests);
    };
    for await (const line of createInterface({ input: answer.body, crlfDelay: Infinity })) {
      const request = requestOf(line, pricing, at);
      if (request) rows.push(request);
      if (rows.length >= chunk) await flush();
    }
    await flush();
  }

  async function finish(b: BatchRow, upstreamStatus: string): Promise<void> {
    const ended = ENDED[upstreamStatus] ?? ENDED.expired!;
    const done = await repo.finish(b.id, { now: clock.now(), upstreamStatus, ...ended });
    // On a period a plan change split, what the release freed of its carry goes back to the part after it, as a
    // call's lease's release gives it (quota-repo.ts, releaseLease).
    if (done) await quotaRepo.giveBackCarry(b.quota_period_id);
  }

  /**
   * A batch the provider was asked to make and whose answer was never read (its process died, or the answer was
   * lost): found at the provider, then polled as any other; else, once it cannot be made any more, its lease released
   * and its row gone.
   */
  async function reconcile(b: BatchRow, now: Date): Promise<void> {
    const at = await reach(b);
    const found = at && now < b.expires_at ? await findMade(b, at) : undefined;
    if (!found) {
      logger.warn({ msg: 'a batch the provider has no trace of: its lease is released', batchId: b.id, leaseId: b.lease_id });
      await quotaRepo.releaseLease(b.lease_id, clock.now());
      return repo.dropPending(b.id);
    }
    const status = typeof found.status === 'string' ? found.status : 'validating';
    if (await repo.opened(b.id, found.id as string, status, now))
      await poll({ ...b, status: 'OPEN', upstream_batch_id: found.id as string, upstream_status: status }, now);
  }

  /**
   * The provider's batch a PENDING row asked for (OpenAI's, Azure's): its list read newest first, back to a little
   * before the row was made, for the batch whose metadata names the row; else the one made of the row's input file
   * that Nexus knows of no batch for. Anthropic's Message Batches carry no metadata: none is found.
   */
  async function findMade(b: BatchRow, at: Reached): Promise<Json | undefined> {
    if (at.protocol.profile === 'anthropic') return undefined;
    const inputFileId = await repo.upstreamFileId(b.batch_file_id);
    const since = Math.floor(b.created_at.getTime() / 1000) - FIND_SKEW_S;
    let byFile: Json | undefined;
    let after: string | undefined;
    for (let page = 0; page < FIND_PAGES; page++) {
      const answer = await get(b, at, `batches?limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      const read = answer.status === 200 ? await json(answer.body) : (await json(answer.body), undefined);
      if (!read) throw new Error(`the provider answered ${answer.status} for the list of batches`);
      const data = (Array.isArray(read.data) ? read.data : []) as Json[];
      for (const batch of data) {
        if (typeof batch?.id !== 'string') continue;
        if (batch.metadata?.[METADATA_KEY] === b.id) return batch;
        if (!byFile && batch.input_file_id === inputFileId && !(await repo.known(b.provider_connection_id, batch.id))) byFile = batch;
      }
      const last = data.at(-1);
      if (!read.has_more || !last || Number(last.created_at) < since) break;
      after = last.id as string;
    }
    return byFile;
  }

  /** One claimed batch at `now` (the round's time): polled, and settled once it ended (a PENDING one: reconciled). */
  async function poll(b: BatchRow, now: Date): Promise<void> {
    if (b.status === 'PENDING') return reconcile(b, now);
    const at = await reach(b);
    // Past its deadline, or its connection gone: finished with what was charged, the rest of its lease released.
    if (!at || now >= b.expires_at) return finish(b, at ? 'expired' : b.upstream_status);
    const answer = await get(b, at, `batches/${encodeURIComponent(b.upstream_batch_id!)}`);
    const read = answer.status === 200 ? await json(answer.body) : (await json(answer.body), undefined);
    const status = endedOf(read);
    if (!status) {
      const seen =
        typeof read?.status === 'string' ? read.status : typeof read?.processing_status === 'string' ? read.processing_status : undefined;
      return repo.polled(b.id, seen ?? b.upstream_status, new Date(now.getTime() + nextPollIn(now.getTime() - b.created_at.getTime())));
    }
    const pricing = await repo.filePricing(b.batch_file_id);
    if (at.protocol.profile === 'anthropic') {
      await settleFile(b, at, `batches/${encodeURIComponent(b.upstream_batch_id!)}/results`, pricing);
      return finish(b, status);
    }
    const output = typeof read!.output_file_id === 'string' ? read!.output_file_id : null;
    const errors = typeof read!.error_file_id === 'string' ? read!.error_file_id : null;
    await repo.noteFiles(b.id, output, errors);
    for (const fileId of [output, errors]) if (fileId) await settleFile(b, at, `files/${encodeURIComponent(fileId)}/content`, pricing);
    await finish(b, status);
  }

  return {
    /** One round: the batches due by `now` claimed and polled; returns how many it claimed. */
    async round(now: Date = clock.now()): Promise<number> {
      const due = await repo.claimDue(now, CLAIM_MS, CLAIMED);
      await Promise.all(
        due.map((b) =>
          poll(b, now).catch((err: Error) => {
            logger.warn({ msg: 'batch poll failed; it is polled again once its claim expires', batchId: b.id, error: err.message });
          }),
        ),
      );
      return due.length;
    },
  };
}
