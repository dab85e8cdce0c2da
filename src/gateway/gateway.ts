/**
 * The gateway's hot path: `{METHOD} /providers/{connectionId}/{providerPath}`.
 *
 * Before the upstream call, at most two database round trips, usually none: the
 * key/access/connection/period lookup (auth-cache.ts, cached) and the quota
 * admission (quota-leases.ts: in memory while the process's lease of the period
 * covers the call, else one statement extending it). The request body is read
 * while the lookup runs. The answer is streamed back as it arrives, with
 * backpressure, usage read on the way; the settlement and the invocation are
 * written after the last byte (call-recorder.ts). Requests reach it straight
 * from the server's request listener, not through express (src/app.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Db } from '../db/database.js';
import type { Clock } from '../domain/actor.js';
import type { AttemptStatus, InvocationRow, InvocationStatus } from '../domain/invocations/invocation-types.js';
import { openProviderApiKey } from '../domain/provider-connections/provider-secret.js';
import { createQuotaRepo } from '../domain/quota/quota-repo.js';
import type { QuotaService } from '../domain/quota/quota-service.js';
import type { KeyHasher } from '../domain/security/key-hash.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { storableText } from '../domain/storable-text.js';
import type { Config } from '../config.js';
import { AppError, toAppError } from '../errors.js';
import { bearerOf, writeError } from '../http/api.js';
import type { RequestLocals } from '../http/locals.js';
import { newId } from '../ids.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { createAuthCache, type AuthRow } from './auth-cache.js';
import { createCallRecorder } from './call-recorder.js';
import { createGatewayDb } from './gateway-db.js';
import { createQuotaLeases, type Admission } from './quota-leases.js';
import { rawHeader, upstreamHeaders } from './headers.js';
import { inspectorFor, modelNamedIn, prepareCall, usageFromJson, type Inspector, type PreparedCall, type Usage } from './inspectors.js';
import { parseGatewayUrl } from './path-safety.js';
import { maskedKey, type MaskedKey } from './secret-mask.js';
import { callRows, type Consumption } from './settlement.js';
import { Relay, RelayList } from './relay.js';
import { createUpstreamPools } from './upstreams.js';

const OPERATIONS: Record<string, string> = {
  GET: 'proxyProviderGet',
  POST: 'proxyProviderPost',
  PUT: 'proxyProviderPut',
  PATCH: 'proxyProviderPatch',
  DELETE: 'proxyProviderDelete',
};

/** A call's bound beyond this is refused 429: no period can hold it, and a lease's multiple of it must fit a bigint. */
const MAX_CALL_UNITS = 2n ** 58n;
/** Model names are recorded up to this length. */
const MAX_MODEL_LENGTH = 256;
const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/;

export interface GatewayDeps {
  /** Where the gateway counts what it does beyond the request metrics (optional: tests build gateways without). */
  metrics?: Metrics;
  db: Db;
  config: Config;
  clock: Clock;
  logger: Logger;
  quota: QuotaService;
  hasher: KeyHasher;
  secretBox: SecretBox;
}

interface QuotaView {
  remaining: bigint;
  reset: Date;
}

const msSince = (from: bigint, to: bigint) => Number(to - from) / 1e6;

/**
 * An upstream answer that did what was asked: a 2xx, or 304 Not Modified. A redirect is not:
 * the gateway follows none and passes no Location on (it would name the upstream's host).
 */
const succeeded = (status: number) => status < 300 || status === 304;

function credentialOf(req: IncomingMessage): string {
  const bearer = bearerOf(rawHeader(req.rawHeaders, 'authorization'));
  if (bearer) return bearer;
  const apiKey = rawHeader(req.rawHeaders, 'x-api-key')?.trim();
  if (apiKey) return apiKey;
  throw new AppError('missing_credentials', 'Send the inference key as Authorization: Bearer or x-api-key');
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
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

/** 401/403/404 in the order a caller can act on them. */
function authorize(row: AuthRow | null, now: Date): AuthRow {
  if (!row || row.revoked_at || row.expires_at <= now) {
    throw new AppError('invalid_inference_key', 'The inference key is invalid, expired or revoked');
  }
  if (row.workspace_status !== 'ACTIVE') throw new AppError('workspace_archived_gateway', 'The workspace is archived');
  if (row.access_status === 'SUSPENDED') {
    throw new AppError('access_suspended', 'The workspace access is suspended', { current_status: row.access_status });
  }
  if (row.access_status !== 'ACTIVE' || row.access_starts_at > now || (row.access_ends_at && row.access_ends_at <= now)) {
    throw new AppError('access_not_active', 'The workspace access is not active', { current_status: row.access_status });
  }
  if (!row.connection_id || row.connection_status === 'ARCHIVED') {
    throw new AppError('provider_connection_not_found', 'No active provider connection with that id', { param: 'providerConnectionId' });
  }
  if (row.connection_status !== 'ACTIVE') {
    throw new AppError('connection_suspended', 'The provider connection is suspended', { current_status: row.connection_status ?? '' });
  }
  return row;
}

function quotaOf(row: AuthRow): QuotaView | undefined {
  if (!row.period_id || !row.period_end) return undefined;
  const remaining = row.granted_units! - row.reserved_units! - row.consumed_units!;
  return { remaining: remaining > 0n ? remaining : 0n, reset: row.period_end };
}


export function createGateway(deps: GatewayDeps) {
  const { config, clock, logger, quota, hasher, secretBox } = deps;
  const { db, owned } = createGatewayDb(deps.db, config.gatewayAsyncCommit);
  const cache = createAuthCache({ db, clock, ttlMs: config.authCacheTtlMs, hash: (token) => hasher.hash(token) });
  const pools = createUpstreamPools({ allowPrivate: config.allowPrivateUpstreams });
  const leases = createQuotaLeases({
    repo: createQuotaRepo(db),
    clock,
    logger,
    ttlMs: config.reservationTtlMs,
    idleMs: config.quotaLeaseIdleMs,
    onStatement: deps.metrics?.leaseStatement,
  });
  const recorder = createCallRecorder({ db, logger, written: leases.written });
  /** The upstream calls under way: a shutdown past its deadline cuts them (cutCalls). */
  const running = new RelayList();
  const SHUTDOWN = new Error('The server shut down before the call ended');

  /** Settles the call on its lease and records it; the lease learns when the record is written. */
  function record(
    call: { invocation: InvocationRow; consumed: Consumption | null; auth: AuthRow },
    admission: Admission | undefined,
    now: Date,
  ): void {
    const take = admission ? leases.settle(admission, call.consumed?.units ?? null) : 0n;
    // Model names and response ids come from opaque bodies: one PostgreSQL cannot store would fail the record and leave
    // the call uncharged.
    call.invocation.requested_model = storableText(call.invocation.requested_model, MAX_MODEL_LENGTH);
    if (call.invocation.attempt_upstream_model) {
      call.invocation.attempt_upstream_model = storableText(call.invocation.attempt_upstream_model, MAX_MODEL_LENGTH);
    }
    if (call.consumed?.model) call.consumed.model = storableText(call.consumed.model, MAX_MODEL_LENGTH);
    if (call.invocation.upstream_response_id) call.invocation.upstream_response_id = storableText(call.invocation.upstream_response_id, 256);
    const rows = callRows({
      invocation: call.invocation,
      lease: admission ? { id: admission.lease.id, bound: admission.bound, take } : undefined,
      consumed: call.consumed,
    });
    recorder.record(
      {
        invocation: rows.invocation,
        leaseCall: rows.leaseCall,
        requestId: call.invocation.request_id,
        keyId: call.auth.key_id,
        lastRequestAt: call.auth.last_request_at,
        admission,
      },
      now,
    );
  }

  /**
   * Responses API calls this process metered lately, by access and response id: the tokens a call
   * continuing one adds to its input (its input and output). Bridges the moment before the record is
   * written; bounded, oldest first out.
   */
  const recentResponses = new Map<string, bigint>();
  const RECENT_RESPONSES = 10_000;

  function rememberResponse(accessId: string, responseId: string, tokens: bigint): void {
    recentResponses.set(`${accessId} ${responseId}`, tokens);
    if (recentResponses.size > RECENT_RESPONSES) recentResponses.delete(recentResponses.keys().next().value!);
  }

  /**
   * The conversation a Responses API call continues, in tokens: its previous response's input and output,
   * as recorded for the same access (another end user's conversations are none of this call's business).
   * 0 when no record has it (a response made elsewhere): that call is then charged exactly afterwards, its
   * excess as an ADJUSTMENT.
   */
  async function conversationTokens(auth: AuthRow, responseId: string): Promise<bigint> {
    const known = recentResponses.get(`${auth.workspace_access_id} ${responseId}`);
    if (known !== undefined) return known;
    const result = await db.raw(
      `select u.input_tokens + u.output_tokens as tokens
         from invocations i join usage_events u on u.invocation_id = i.id and u.kind = 'USAGE'
        where i.workspace_id = ? and i.upstream_response_id = ? and i.workspace_access_id = ?
        order by i.started_at desc limit 1`,
      [auth.workspace_id, responseId, auth.workspace_access_id],
    );
    const row = (result.rows as { tokens: bigint | string }[])[0];
    return row ? BigInt(row.tokens) : 0n;
  }

  /** A metered call's bound on the access's current period, and its admission there (quota-leases.ts). */
  async function admitMetered(auth: AuthRow, inspector: Inspector, raw: Buffer) {
    if (!auth.period_id || !auth.period_end) throw new AppError('quota_insufficient', 'The access has no current quota period');
    const prepared = prepareCall(inspector, raw, auth.max_output_tokens!);
    if (prepared.previousResponseId) prepared.inputBound += await conversationTokens(auth, prepared.previousResponseId);
    const inputPpm =
      auth.input_multiplier_ppm! > auth.cached_input_multiplier_ppm! ? auth.input_multiplier_ppm! : auth.cached_input_multiplier_ppm!;
    const bound = quota.computeUnits(
      { inputTokens: prepared.inputBound, cachedInputTokens: 0n, outputTokens: prepared.outputBound },
      { inputMultiplierPpm: inputPpm, cachedInputMultiplierPpm: 0n, outputMultiplierPpm: auth.output_multiplier_ppm! },
    );
    if (bound > MAX_CALL_UNITS) {
      // No period holds that many (a lease asks for a multiple of it, which must stay a bigint).
      throw new AppError('quota_insufficient', `This call may need up to ${bound} units, more than a quota period can hold`, {
        reset_at: auth.period_end.toISOString(),
      });
    }
    const held = await leases.admit({ workspaceId: auth.workspace_id, accessId: auth.workspace_access_id, periodId: auth.period_id }, bound);
    return { prepared, bound, held, reset: auth.period_end };
  }

  /**
   * A valid key's answers carry the access's quota headers, its 403/404/409/429 too: the
   * lease's view while this process holds one on the period (what its last calls left),
   * else the looked-up row's (at most NEXUS_AUTH_CACHE_TTL_MS old).
   */
  function keyQuotaView(row: AuthRow | null, now: Date): QuotaView | undefined {
    if (!row || row.revoked_at || row.expires_at <= now) return undefined;
    const view = quotaOf(row);
    if (!view) return undefined;
    const leased = leases.remaining(row.period_id!);
    return leased === undefined ? view : { remaining: leased, reset: view.reset };
  }

  /** The shared Error answer, with the gateway's headers; a stream already under way is cut instead. */
  function sendError(res: ServerResponse, locals: RequestLocals, err: unknown, metered: boolean, view: QuotaView | undefined): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.setHeader('x-request-id', locals.requestId);
    res.setHeader('x-nexus-request-id', locals.requestId);
    res.setHeader('x-nexus-metering-status', metered ? 'metered' : 'unmetered');
    if (view) {
      res.setHeader('x-nexus-quota-remaining', view.remaining.toString());
      res.setHeader('x-nexus-quota-reset', view.reset.toISOString());
    }
    // The official SDKs retry 409 and 429 on their own (three calls, seconds of backoff); none of the
    // gateway's own refusals changes by retrying, so they are told not to (a 502 may, and stays silent).
    const status = toAppError(err).status;
    if (status < 500) res.setHeader('x-should-retry', 'false');
    writeError(res, err, locals);
  }

  /** A gateway request; `locals` carries its request id and arrival time (the request observer's). */
  async function handle(req: IncomingMessage, res: ServerResponse, locals: RequestLocals): Promise<void> {
    const requestId = locals.requestId;
    const t0 = locals.startedAt;
    const startedAt = clock.now();
    const method = req.method!;
    locals.operationId = OPERATIONS[method] ?? 'proxyProvider';

    let view: QuotaView | undefined;
    /** The key lookup: its quota headers are worked out only for an answer that is not admitted (errors, unmetered calls). */
    let looked: AuthRow | null = null;
    let metered = false;
    let invocation: InvocationRow | undefined;
    let auth: AuthRow | undefined;
    let admission: Admission | undefined;
    let raw: Buffer | undefined;
    try {
      if (!OPERATIONS[method]) throw new AppError('method_not_allowed', `${method} is not proxied`);
      const target = parseGatewayUrl(req.url!);
      const token = credentialOf(req);
      const bodyRead = readBody(req, config.gatewayBodyLimitBytes);
      bodyRead.catch(() => {});
      let entry = await cache.lookup(token, target.connectionId);
      looked = entry.row;
      auth = authorize(entry.row, startedAt);
      const profile = auth.protocol_profile!;
      const endpoint = target.providerPath.replace(/\/$/, '');
      const inspector = inspectorFor(profile, method, target.route);
      metered = Boolean(inspector);
      const traceId = TRACEPARENT.exec(rawHeader(req.rawHeaders, 'traceparent') ?? '')?.[1] ?? null;
      invocation = {
        id: newId(),
        workspace_id: auth.workspace_id,
        workspace_access_id: auth.workspace_access_id,
        provider_connection_id: auth.connection_id!,
        inference_key_id: auth.key_id,
        request_id: requestId,
        trace_id: traceId,
        method,
        endpoint,
        requested_model: '',
        status: 'REJECTED',
        metering_status: metered ? 'metered' : 'unmetered',
        streamed: false,
        reservation_id: null,
        quota_units: 0n,
        error_code: null,
        started_at: startedAt,
        first_token_at: null,
        completed_at: null,
        total_latency_ms: null,
        provider_latency_ms: null,
        nexus_latency_ms: null,
        total_ttft_ms: null,
        provider_ttft_ms: null,
        nexus_ttft_ms: null,
        attempt_id: null,
        attempt_upstream_model: null,
        attempt_status: null,
        attempt_http_status: null,
        attempt_error_code: null,
        attempt_started_at: null,
        attempt_first_token_at: null,
        attempt_completed_at: null,
        attempt_duration_ms: null,
      };
      if (!inspector && !auth.allow_unmetered_passthrough) {
        throw new AppError('unmetered_endpoint', `${req.method} ${endpoint} has no usage inspector and the workspace does not allow unmetered passthrough`);
      }
      raw = await bodyRead;
      let prepared: PreparedCall | undefined;
      if (inspector) {
        const encoding = rawHeader(req.rawHeaders, 'content-encoding');
        if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
          // The gateway reads the body to bound the call; it would bound one body and send the upstream another.
          throw new AppError('invalid_request', `A metered endpoint needs an uncompressed body (this one came as Content-Encoding: ${encoding})`, {
            param: 'content-encoding',
          });
        }
        let metering = await admitMetered(auth, inspector, raw);
        if (!metering.held.ok && metering.held.periodOver) {
          // The cached period is over (a plan change split it, or it ended): read the access again, once.
          entry = await cache.reload(token, target.connectionId);
          looked = entry.row;
          auth = authorize(entry.row, startedAt);
          metering = await admitMetered(auth, inspector, raw);
        }
        const { held, bound, reset } = metering;
        prepared = metering.prepared;
        invocation.requested_model = prepared.requestedModel;
        invocation.streamed = prepared.stream;
        if (!held.ok) {
          view = { remaining: held.available, reset };
          throw new AppError('quota_insufficient', `This call may need up to ${bound} units; ${held.available} are available`, {
            reset_at: reset.toISOString(),
          });
        }
        admission = held.admission;
        invocation.reservation_id = admission.lease.id;
        view = { remaining: held.remaining, reset };
      } else {
        invocation.requested_model = modelNamedIn(raw);
        view = keyQuotaView(looked, startedAt);
      }
      entry.apiKey ??= openProviderApiKey(secretBox, {
        id: auth.connection_id!,
        api_key_ciphertext: auth.api_key_ciphertext!,
        api_key_key_id: auth.api_key_key_id!,
      });
      await proxy(req, res, locals, {
        auth,
        apiKey: entry.apiKey,
        maskedKey: entry.maskedKey === undefined ? (entry.maskedKey = maskedKey(entry.apiKey)) : entry.maskedKey,
        base: (entry.baseUrl ??= new URL(auth.base_url!)),
        target,
        body: prepared?.body ?? raw,
        inspector,
        prepared,
        invocation,
        admission,
        view,
        t0,
      });
    } catch (err) {
      sendError(res, locals, err, metered, view ?? keyQuotaView(looked, startedAt));
      // Refused or failed after the access and connection were known: recorded (REJECTED: no upstream call).
      if (invocation && auth && !invocation.completed_at) {
        const appError = toAppError(err);
        // A metered call refused while its body was read (a bad cap, say) still names its model.
        if (!invocation.requested_model && raw) invocation.requested_model = modelNamedIn(raw);
        invocation.status = appError.status < 500 ? 'REJECTED' : 'FAILED';
        invocation.error_code = appError.code;
        invocation.completed_at = clock.now();
        invocation.total_latency_ms = msSince(t0, process.hrtime.bigint());
        record({ invocation, consumed: null, auth }, admission, clock.now());
      }
    }
  }

  interface ProxyInput {
    auth: AuthRow;
    apiKey: string;
    /** The key as the answer's mask looks for it (null: too short to look for). */
    maskedKey: MaskedKey | null;
    base: URL;
    target: { providerPath: string; search: string };
    body: Buffer;
    inspector: Inspector | undefined;
    prepared: PreparedCall | undefined;
    invocation: InvocationRow;
    admission: Admission | undefined;
    view: QuotaView | undefined;
    t0: bigint;
  }

  async function proxy(req: IncomingMessage, res: ServerResponse, locals: RequestLocals, p: ProxyInput): Promise<void> {
    const { auth, invocation, inspector, prepared } = p;
    const base = p.base;
    const pool = pools.get(base);
    const path = `${base.pathname.replace(/\/$/, '')}/${p.target.providerPath}${p.target.search}`;
    const headers = upstreamHeaders(req.rawHeaders, auth.protocol_profile!, p.apiKey, p.body.length);
    const answerHeaders = ['x-nexus-request-id', locals.requestId, 'x-nexus-metering-status', inspector ? 'metered' : 'unmetered'];
    if (p.view) answerHeaders.push('x-nexus-quota-remaining', p.view.remaining.toString(), 'x-nexus-quota-reset', p.view.reset.toISOString());
    const relay = new Relay(res, {
      requestId: locals.requestId,
      answerHeaders,
      inspector,
      prepared,
      maskedKey: p.maskedKey,
      onResponse: (responseId, tokens) => rememberResponse(auth.workspace_access_id, responseId, tokens),
    });
    const attemptStartedAt = clock.now();
    running.add(relay);
    await relay.start(pool, { method: req.method!, path, headers, body: p.body, timeoutMs: auth.upstream_timeout_ms ?? config.upstreamTimeoutMs });
    running.delete(relay);

    /** A call stopped on our side, by the shutdown or by its client's leaving: how it is recorded. */
    const cut: [InvocationStatus, AttemptStatus, string] | undefined =
      relay.cancelReason === SHUTDOWN
        ? ['FAILED', 'ABORTED', 'server_shutdown']
        : relay.clientGone
          ? ['CLIENT_ABORTED', 'ABORTED', 'client_aborted']
          : undefined;
    let status: InvocationStatus;
    let attemptStatus: AttemptStatus;
    let errorCode: string | null = null;
    if (relay.end === 'complete') {
      attemptStatus = succeeded(relay.status!) ? 'SUCCEEDED' : 'UPSTREAM_ERROR';
      status = relay.clientGone ? 'CLIENT_ABORTED' : attemptStatus;
      if (relay.clientGone) errorCode = 'client_aborted';
    } else if (cut) {
      [status, attemptStatus, errorCode] = cut;
    } else if (relay.end === 'broken') {
      [status, attemptStatus, errorCode] = ['FAILED', 'FAILED', 'upstream_stream_broken'];
      logger.warn({ msg: 'upstream stream broke', requestId: invocation.request_id, error: relay.error?.message });
    } else {
      // No answer: refused, reset, DNS failure, timeout before headers.
      const code = (relay.error as { code?: string } | undefined)?.code;
      status = 'FAILED';
      attemptStatus = 'FAILED';
      const timedOut = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
      errorCode = timedOut ? 'upstream_timeout' : 'upstream_unavailable';
      logger.warn({ msg: 'no upstream answer', requestId: invocation.request_id, code, error: relay.error?.message });
      const refusal = timedOut
        ? new AppError('upstream_timeout', 'The provider did not answer within the timeout')
        : new AppError('upstream_unavailable', 'The provider could not be reached');
      sendError(res, locals, refusal, Boolean(inspector), p.view);
    }
    let usage = relay.usage;
    let usageComplete = relay.usageComplete;
    let upstreamModel = relay.model ?? '';
    if (relay.responseId) invocation.upstream_response_id = relay.responseId;
    const json = relay.jsonAnswer();
    if (json !== null) {
      const parsed = usageFromJson(inspector!, json);
      usage = parsed.usage;
      usageComplete = usage !== null;
      if (parsed.model) upstreamModel = parsed.model;
      if (parsed.responseId) {
        invocation.upstream_response_id = parsed.responseId;
        if (usage) rememberResponse(auth.workspace_access_id, parsed.responseId, usage.inputTokens + usage.outputTokens);
      }
    }

    // Accounting, then the records, off the response's path.
    const tEnd = process.hrtime.bigint();
    const now = clock.now();
    let consumed: Consumption | null = null;
    if (p.admission && prepared && relay.status !== undefined && relay.status < 300) {
      const counted = chargeable(usage, usageComplete, relay.dataEvents, prepared);
      if (!usageComplete && !errorCode) errorCode = 'usage_missing';
      // An upstream reporting more cached tokens than input tokens in all is taken at its cached figure.
      const uncached = counted.inputTokens > counted.cachedInputTokens ? counted.inputTokens - counted.cachedInputTokens : 0n;
      const units = quota.computeUnits(
        {
          inputTokens: uncached,
          cachedInputTokens: counted.cachedInputTokens,
          outputTokens: counted.outputTokens,
        },
        {
          inputMultiplierPpm: auth.input_multiplier_ppm!,
          cachedInputMultiplierPpm: auth.cached_input_multiplier_ppm!,
          outputMultiplierPpm: auth.output_multiplier_ppm!,
        },
      );
      // An absurd usage figure is charged at most what a call may be bounded by, so its records still
      // fit the database (an overflowing one failed the whole write and the call went unrecorded).
      const charge = units > MAX_CALL_UNITS ? MAX_CALL_UNITS : units;
      invocation.quota_units = charge;
      consumed = {
        units: charge,
        inputTokens: counted.inputTokens,
        cachedInputTokens: counted.cachedInputTokens,
        outputTokens: counted.outputTokens,
        model: upstreamModel || invocation.requested_model || null,
      };
    }
    const providerMs = msSince(relay.tStart, relay.tUpstreamEnd!);
    invocation.attempt_id = newId();
    invocation.attempt_upstream_model = upstreamModel || invocation.requested_model;
    invocation.attempt_status = attemptStatus;
    invocation.attempt_http_status = relay.status ?? null;
    invocation.attempt_error_code = errorCode;
    invocation.attempt_started_at = attemptStartedAt;
    invocation.attempt_completed_at = now;
    invocation.attempt_duration_ms = providerMs;
    invocation.status = status;
    invocation.error_code = errorCode;
    invocation.completed_at = now;
    invocation.total_latency_ms = msSince(p.t0, tEnd);
    invocation.provider_latency_ms = providerMs;
    invocation.nexus_latency_ms = invocation.total_latency_ms - providerMs;
    if (invocation.streamed && relay.tFirstUpstream !== undefined) {
      const providerTtft = msSince(relay.tStart, relay.tFirstUpstream);
      invocation.attempt_first_token_at = new Date(attemptStartedAt.getTime() + providerTtft);
      invocation.provider_ttft_ms = providerTtft;
      if (relay.tFirstClient !== undefined) {
        invocation.total_ttft_ms = msSince(p.t0, relay.tFirstClient);
        invocation.first_token_at = new Date(invocation.started_at.getTime() + invocation.total_ttft_ms);
        invocation.nexus_ttft_ms = invocation.total_ttft_ms - providerTtft;
      }
    }
    record({ invocation, consumed, auth }, p.admission, now);
  }

  async function drainAll(): Promise<void> {
    await recorder.drain();
    await leases.drain();
  }

  return {
    handle,
    /**
     * A shutdown's deadline has come: the upstream calls still under way are cut (a metered JSON call
     * would otherwise be read to its end, up to the upstream timeout) and recorded FAILED `server_shutdown`,
     * charged by the rule of an answer that broke off (chargeable()). Their clients' connections are
     * closed next by the server.
     */
    cutCalls(): void {
      running.forEach((relay) => relay.cancel(SHUTDOWN));
    },
    /** Waits for the settlements and records started so far, then returns the quota leases not in use. */
    drain: drainAll,
    /** Releases HELD reservations past their TTL (a process died holding them); returns how many. */
    sweepExpired: () => quota.sweepExpired(clock.now()),
    /** Forget cached lookups: keys and the responses recorded lately (tests). */
    clearCache: () => {
      cache.clear();
      recentResponses.clear();
    },
    async close(): Promise<void> {
      await drainAll();
      leases.close();
      cache.close();
      await pools.close();
      if (owned) await db.destroy();
    },
  };
}

/**
 * What a call is charged. Exact when the provider reported usage. Otherwise
 * (a broken or aborted stream, an answer without readable usage): the input
 * reported so far or else the input bound, and the output reported so far or
 * else one token per data event received, at most the output bound; a JSON
 * answer without usage is charged the whole reservation.
 */
function chargeable(usage: Usage | null, complete: boolean, dataEvents: number, prepared: PreparedCall): Usage {
  if (usage && complete) return usage;
  const inputTokens = usage?.inputTokens ?? prepared.inputBound;
  const cachedInputTokens = usage?.cachedInputTokens ?? 0n;
  if (!prepared.stream) return { inputTokens, cachedInputTokens, outputTokens: prepared.outputBound };
  const seen = BigInt(dataEvents);
  const estimate = seen < prepared.outputBound ? seen : prepared.outputBound;
  const reported = usage?.outputTokens ?? 0n;
  return { inputTokens, cachedInputTokens, outputTokens: reported > estimate ? reported : estimate };
}

export type Gateway = ReturnType<typeof createGateway>;
