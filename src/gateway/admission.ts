/**
 * Whether the gateway takes a call, and on what terms: a function of the key's row, the connection or route it
 * reached, the connection's protocol, the method and path, and the body. `authorizeCall()` reads the key's row
 * before a call is opened (401 for the key, 403 and 404 for its workspace, access and connection); `admit()`
 * decides the rest, in the order a caller can act on the answer:
 *   1. a WebSocket handshake that is not a Realtime session's (those never reach here: src/realtime/realtime-gateway.ts):
 *      501 websocket_not_supported, whatever the workspace allows (one on an ephemeral token, Gemini's
 *      BidiGenerateContentConstrained: first 409 unmetered_endpoint unless its class is let through);
 *   2. a path of another API than the connection's: 400 protocol_mismatch;
 *   3. encoded slashes only another protocol reads as slashes (path-safety.ts);
 *   4. what the protocol cannot meter (its checkRequest), refused even where unmetered calls are allowed;
 *   5. an unmetered path whose passthrough class neither the workspace nor the plan lets through (passThrough):
 *      unmetered_endpoint, naming the class;
 *   6. a metered or passed-through call while the workspace's spend budget is reached: workspace_budget_exceeded;
 * then, its body read: a metered call's bounds (inspectors.ts), its model, its place in the first wave
 * (first-wave.ts), its bound on this process's lease of the access's period (quota-leases.ts) and the plan's
 * rate limits; an unmetered call's model and rate limits; a free call's model. It resolves with the body to
 * send, or rejects with the refusal (an AppError: its code and status). What it found and took is kept by
 * the call as it goes (`Admitted`), so a refusal midway is recorded with it and gives back what it took.
 */
import type { Admission } from '../domain/quota/quota-leases.js';
import type { ModelPolicy, Pricing } from '../domain/quota/model-pricing.js';
import { boundUnits, MAX_CALL_UNITS } from '../domain/quota/quota-math.js';
import type { RateTicket } from '../domain/rate-limits/rate-allowances.js';
import { limitsOf } from '../domain/rate-limits/rate-service.js';
import { hasLimits, type RateView } from '../domain/rate-limits/rate-types.js';
import { AppError } from '../errors.js';
import { foreignProtocolOf } from '../protocols/index.js';
import { METERED_SESSIONS, PASSTHROUGH_CLASSES, type PassthroughClass } from '../protocols/passthrough.js';
import type { QuotaView } from './answers.js';
import type { CallMeter } from './call-meter.js';
import { failed } from './call-trace.js';
import type { CallContext } from './call-flow.js';
import { asksForWebSocket, assertIdentityEncoding } from './client-request.js';
import type { FirstWaveSlot } from './first-wave.js';
import { filterModelList, modelNamedIn, prepareRequest, type FreeEndpoint, type PreparedCall } from '../protocols/inspectors.js';
import type { FormRead } from '../protocols/protocol.js';
import type { CallRead } from '../records/invocation-record.js';
import type { AuthRow } from './auth-repo.js';
import type { MeteredCall } from './metered-call.js';
import { checkSlashesFor } from './path-safety.js';
import { Upload, type Sendable } from './upload.js';

const NO_BODY = Buffer.alloc(0);

/** What a call's admission found and took, kept by its call (what its request was read for is its CallRead). */
export class Admitted implements CallRead {
  requestedModel = '';
  streamed = false;
  leaseId: string | null = null;
  /** The quota headers of the call's answer, once admitted (or refused for quota). */
  view: QuotaView | undefined = undefined;
  /** Where its plan's rate limits stand for its answer's headers, once admitted (or refused for a limit). */
  rateView: RateView | undefined = undefined;
  /** What the inspector made of a metered call's request: its bounds, and the body to send. */
  prepared: PreparedCall | undefined = undefined;
  /** What a metered call is priced at: the model rule of the model its request names (never the one the provider reports). */
  pricing: Pricing | undefined = undefined;
  /** Its bound, admitted on this process's lease of the access's period. */
  lease: Admission | undefined = undefined;
  rateTicket: RateTicket | undefined = undefined;
  /** Its place in the first wave of its connection's model, while that has no history (first-wave.ts). */
  firstWave: FirstWaveSlot | undefined = undefined;
  /** Its body as read (none: refused before it was). */
  raw: Buffer | undefined = undefined;
  /** A multipart upload's, as it came, when the call has a request log (which keeps its summary): held until then. */
  upload: Upload | undefined = undefined;
  /** The key's row was read again (a period found over): once at most. */
  reloaded = false;
  /** An unmetered call let through: its path's passthrough class (none: metered, free, or refused before). */
  passthroughClass: PassthroughClass | undefined = undefined;
}

/**
 * The looked-up row of a key that may be answered at all (a gateway call, /v1/me): 401 for an unknown,
 * expired or revoked key, 403 for a key of an archived workspace.
 */
export function authorizeKey(row: AuthRow | null, now: Date): AuthRow {
  if (!row || row.revoked_at || row.expires_at <= now) {
    throw new AppError('invalid_inference_key', 'The inference key is invalid, expired or revoked');
  }
  if (row.workspace_status !== 'ACTIVE') throw new AppError('workspace_archived_gateway', 'The workspace is archived');
  return row;
}

/**
 * The looked-up row of a gateway call that may go on: authorizeKey's refusals, then 403 and 404 for its
 * access and connection, in the order a caller can act on them.
 */
export function authorizeCall(found: AuthRow | null, now: Date): AuthRow {
  const row = authorizeKey(found, now);
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

/** 403 before the upstream is called: the strategy does not allow the model the request names (or it names none). */
export function assertModelAllowed(policy: ModelPolicy, model: string): void {
  if (policy.allows(model)) return;
  throw new AppError(
    'model_not_allowed',
    model
      ? `The model '${model}' is not allowed on this plan`
      : 'The request names no model, and this plan allows only the models it lists',
    { param: 'model' },
  );
}

/** The call's admission (its rules above); resolves with the body to send upstream. */
export async function admit(meter: CallMeter, ctx: CallContext): Promise<Sendable> {
  const { call, protocol, target } = ctx;
  const { start } = call;
  const { method, endpoint, startedAt } = start;
  const { auth, inspector } = call;
  // Governed but free: the model list, a model's description, token counting (no quota, no workspace setting).
  const free = inspector ? undefined : protocol.freeEndpointFor(method, target.route);
  if (asksForWebSocket(ctx.req)) {
    // A session on an ephemeral token (Gemini's BidiGenerateContentConstrained) is refused as the token is, 409.
    const ephemeral = !inspector && !free && protocol.passthroughClassFor(target.route) === 'realtime_client_secrets';
    if (ephemeral && !letsThrough(auth, 'realtime_client_secrets')) {
      throw notLetThrough(auth, `${method} ${endpoint}`, 'realtime_client_secrets');
    }
    throw new AppError(
      'websocket_not_supported',
      `${method} ${endpoint} asks for a WebSocket session; the gateway does not relay WebSocket connections`,
    );
  }
  // A path of another API (an Anthropic path on an OpenAI connection, say) is never forwarded unmetered.
  const foreign = inspector || free ? undefined : foreignProtocolOf(protocol, method, target.route);
  if (foreign) {
    throw new AppError(
      'protocol_mismatch',
      `${method} ${endpoint} is a path of the ${foreign.title} API; this connection speaks '${protocol.profile}' (${protocol.title}), which meters ${protocol.meters}`,
    );
  }
  checkSlashesFor(target, protocol.profile);
  // What the protocol cannot meter (a Gemini stream that is not SSE, Bedrock's InvokeModel) is refused, never
  // forwarded unmetered, even where the workspace allows unmetered calls.
  if (!free) protocol.checkRequest?.(inspector?.endpoint, target.search, target.route);
  if (!inspector && !free) passThrough(call, protocol.passthroughClassFor(target.route));
  // The workspace's hard spend budget is reached: no new metered or passed-through call until its window ends
  // (docs/pricing.md "Budgets").
  if (!free) assertBudget(auth, startedAt);
  const sent = await ctx.body;
  // An upload is sent as it came (upload.ts): what admission reads of it is its form, which its endpoint reads.
  const upload = sent instanceof Upload ? sent : undefined;
  const raw = (call.admitted.raw = upload ? NO_BODY : (sent as Buffer));
  if (upload) {
    if (call.log) (call.admitted.upload = upload).hold();
    call.admitted.requestedModel = start.routeModel ?? modelNamedIn(upload.form);
  }
  if (inspector) {
    assertIdentityEncoding(ctx.req);
    const span = ctx.trace?.admission();
    try {
      await admitMetered(meter, call, upload ? upload.form : raw);
    } catch (err) {
      if (span) failed(span, err);
      throw err;
    } finally {
      span?.end();
    }
    return upload ?? call.admitted.prepared!.body;
  }
  if (free) {
    const allows = admitFree(meter, call, free, raw);
    if (allows) ctx.rewriteJson = (text) => filterModelList(text, allows, protocol.modelList);
  } else {
    await admitPassthrough(meter, call, raw);
  }
  return sent;
}

/** 402 while the workspace's hard spend budget is reached (a metered or passed-through call, a Realtime session's turn). */
export function assertBudget(auth: AuthRow, now: Date): void {
  if (auth.budget_exceeded_until && auth.budget_exceeded_until > now) {
    throw new AppError('workspace_budget_exceeded', "The workspace's spend budget is reached for its current window", {
      reset_at: auth.budget_exceeded_until.toISOString(),
    });
  }
}

/** Whether the workspace or the plan lets a class through (the workspace's deprecated allowUnmeteredPassthrough: every class). */
export function letsThrough(auth: AuthRow, passthroughClass: PassthroughClass): boolean {
  return (
    auth.allow_unmetered_passthrough ||
    auth.workspace_passthrough_classes.includes(passthroughClass) ||
    auth.plan_passthrough_classes.includes(passthroughClass)
  );
}

/**
 * An unmetered path: let through when the workspace or the plan lets its class through (kept as the call's
 * `passthroughClass`), else 409 unmetered_endpoint naming the class and what letting it through opens.
 */
function passThrough(call: MeteredCall, passthroughClass: PassthroughClass): void {
  const { auth, start } = call;
  if (letsThrough(auth, passthroughClass)) {
    call.admitted.passthroughClass = passthroughClass;
    return;
  }
  throw notLetThrough(auth, `${start.method} ${start.endpoint}`, passthroughClass);
}

/** 409 unmetered_endpoint: `what` (a method and an endpoint) is of a passthrough class the access does not let through. */
export function notLetThrough(auth: AuthRow, what: string, passthroughClass: PassthroughClass): AppError {
  return new AppError(
    'unmetered_endpoint',
    `${what} is not metered on an '${auth.protocol_profile!}' connection: its passthrough class ` +
      `'${passthroughClass}' is not let through. Letting it through (passthroughClasses of the workspace or the plan) opens ` +
      `${PASSTHROUGH_CLASSES[passthroughClass]}, uncharged to quota (rate limits, the budget and a per-call price still apply), ` +
      `on the provider account every end user of the workspace shares` +
      (passthroughClass === 'realtime_client_secrets' && METERED_SESSIONS[auth.protocol_profile!]
        ? `. ${METERED_SESSIONS[auth.protocol_profile!]}`
        : ''),
    { passthrough_class: passthroughClass },
  );
}

/**
 * A metered call: its bound on the access's current period, admitted on this process's lease of it.
 * Throws the refusal (a bad request, or 429 quota_insufficient with the view set). When the key's row
 * named a period that is over (a plan change split it, or it ended), the row is read again, once, and
 * the call admitted on it.
 */
async function admitMetered(meter: CallMeter, call: MeteredCall, request: Buffer | FormRead): Promise<void> {
  const { auth, admitted, start } = call;
  const reset = auth.period_end;
  if (!auth.period_id || !reset) throw new AppError('quota_insufficient', 'The access has no current quota period');
  const caps = { maxOutputTokens: auth.max_output_tokens!, clamp: auth.output_cap_policy !== 'refuse' };
  // The endpoint reads its request, whole or as a form, by its table (protocol.ts, EndpointSpec).
  const prepared = prepareRequest(call.inspector!, request, caps, start.routeModel);
  admitted.prepared = prepared;
  admitted.requestedModel = prepared.requestedModel;
  admitted.streamed = prepared.stream;
  const policy = meter.modelPolicy(auth);
  assertModelAllowed(policy, prepared.requestedModel);
  const pricing = (admitted.pricing = policy.pricingFor(prepared.requestedModel));
  if (prepared.previousResponseId) prepared.inputBound += await meter.conversationTokens(auth, prepared.previousResponseId);
  // A JSON call to a model its connection has not answered in this process yet: a few at a time per access,
  // the others waiting for the first answer, which admits them at what it taught (first-wave.ts). Once.
  if (!prepared.stream && !admitted.reloaded) {
    const slot = meter.firstWave.enter(auth.workspace_access_id, auth.connection_id!, prepared.requestedModel);
    admitted.firstWave = slot instanceof Promise ? await slot : slot;
  }
  // An upstream seen to answer past its calls' bounds: admitted at what it produced (learned-bounds.ts).
  let learned = meter.learned.output(auth.connection_id!, prepared.requestedModel, prepared.stream);
  // A route's call: quota is reserved once, at the largest bound among its targets.
  for (const id of start.boundConnections ?? []) {
    const other = meter.learned.output(id, prepared.requestedModel, prepared.stream);
    if (other > learned) learned = other;
  }
  // A connection whose upstream may answer past the cap it is sent: admitted at the most the plan lets a call ask for.
  let output = prepared.outputBound;
  if ((start.uncappedTarget || auth.connection_enforces_output_cap === false) && prepared.outputCeiling > output)
    output = prepared.outputCeiling;
  const bound = boundUnits(prepared.inputBound, learned > output ? learned : output, pricing, prepared.boundKinds);
  if (bound > MAX_CALL_UNITS) {
    throw new AppError('quota_insufficient', `This call may need up to ${bound} units, more than a quota period can hold`, {
      reset_at: reset.toISOString(),
    });
  }
  const held = await meter.leases.admit(
    { workspaceId: auth.workspace_id, accessId: auth.workspace_access_id, periodId: auth.period_id },
    bound,
  );
  if (!held.ok) {
    if (held.periodOver && !admitted.reloaded) return readAgain(meter, call, request);
    admitted.view = { remaining: held.available, reset };
    throw new AppError('quota_insufficient', `This call may need up to ${bound} units; ${held.available} are available`, {
      reset_at: reset.toISOString(),
    });
  }
  admitted.lease = held.admission;
  admitted.leaseId = held.admission.lease.id;
  admitted.view = { remaining: held.remaining, reset };
  await admitRate(meter, call, prepared.inputBound + prepared.outputBound);
}

/** The cached period is over (a plan change split it, or it ended): the key's row is read again, once, and the call admitted on it. */
async function readAgain(meter: CallMeter, call: MeteredCall, request: Buffer | FormRead): Promise<void> {
  call.admitted.reloaded = true;
  call.readAgain(await meter.reload(call.start.credential, call.connectionId));
  return admitMetered(meter, call, request);
}

/**
 * The plan's rate limits (none: nothing to do): a request, `tokens` (the call's bound) and a slot, on
 * this process's allowance of the access (rate-allowances.ts). Throws 429 rate_limited with the view set.
 */
export async function admitRate(meter: CallMeter, call: Pick<MeteredCall, 'auth' | 'admitted'>, tokens: bigint): Promise<void> {
  const auth = call.auth;
  const limits = limitsOf(auth);
  if (!hasLimits(limits)) return;
  const counted = tokens > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(tokens);
  const admitted = await meter.rates.admit({ workspaceId: auth.workspace_id, accessId: auth.workspace_access_id }, limits, counted);
  call.admitted.rateView = admitted.view;
  if (!admitted.ok) {
    const message = admitted.never
      ? `This call may use up to ${counted} tokens, more than the plan's ${limits.tokensPerMinute} tokens per minute`
      : admitted.reason === 'concurrent'
        ? `The plan allows ${limits.concurrentCalls} concurrent calls; retry after ${admitted.retryAfterS} s`
        : `The plan's ${admitted.reason === 'requests' ? 'requests' : 'tokens'} per minute are used up; retry after ${admitted.retryAfterS} s`;
    throw new AppError('rate_limited', message, {
      param: admitted.reason === 'requests' ? 'requestsPerMinute' : admitted.reason === 'tokens' ? 'tokensPerMinute' : 'concurrentCalls',
      retry_after: admitted.never ? undefined : admitted.retryAfterS,
    });
  }
  call.admitted.rateTicket = admitted.ticket;
}

/**
 * An unmetered call let through (its class is the workspace's or the plan's): its model as the body names it, the
 * key's quota view; a request and a slot of its plan's rate limits. A JSON body naming a model the strategy does not
 * allow is refused (403) all the same. While the access has a period, the call is admitted on its lease at a bound of
 * 0 units (never refused for quota): that is what its record is written on, 0 units and the cost of a price per call
 * where its price sets one (docs/pricing.md, "Kinds").
 */
async function admitPassthrough(meter: CallMeter, call: MeteredCall, raw: Buffer): Promise<void> {
  const model = call.admitted.requestedModel || modelNamedIn(raw);
  call.admitted.requestedModel = model;
  call.admitted.view = meter.quotaView(call.auth, call.start.startedAt);
  const policy = meter.modelPolicy(call.auth);
  if (policy.restricted && model) assertModelAllowed(policy, model);
  await admitRate(meter, call, 0n);
  await admitAtZero(meter, call, policy);
}

/** A passed-through call on its access's lease at 0 units, while the access has a period: what its record is written on. */
async function admitAtZero(meter: CallMeter, call: MeteredCall, policy: ModelPolicy): Promise<void> {
  const { auth, admitted } = call;
  if (!auth.period_id) return;
  const target = { workspaceId: auth.workspace_id, accessId: auth.workspace_access_id, periodId: auth.period_id };
  const held = await meter.leases.admit(target, 0n);
  if (!held.ok) return;
  admitted.pricing = policy.pricingFor(admitted.requestedModel);
  admitted.lease = held.admission;
  admitted.leaseId = held.admission.lease.id;
}

/**
 * A governed but free call (the model list, a model's description, token counting): no quota is taken.
 * A model outside the strategy's allow-list is refused (403); for the list, returns the test its answer
 * is filtered by (none when every model is allowed).
 */
function admitFree(meter: CallMeter, call: MeteredCall, endpoint: FreeEndpoint, raw: Buffer): ((model: string) => boolean) | undefined {
  const { auth, admitted } = call;
  const now = call.start.startedAt;
  const policy = meter.modelPolicy(auth);
  admitted.view = meter.quotaView(auth, now);
  // Not counted against the limits, but answered with where they stand, as every answer of the access.
  admitted.rateView = meter.rateView(auth, now);
  if (endpoint.kind === 'models') return policy.restricted ? (model) => policy.allows(model) : undefined;
  const model = endpoint.model ?? modelNamedIn(raw);
  admitted.requestedModel = model;
  if (policy.restricted) assertModelAllowed(policy, model);
  return undefined;
}
