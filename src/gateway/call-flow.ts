/**
 * A call's flow, from its opening to its record: the one module that hands a MeteredCall its events. It admits
 * the call (admission.ts), sends it upstream (one attempt on a plain connection; a route's attempts, or those of
 * a connection's retry policy, are made by route-call.ts's loop, which hands each attempt's events here), tells
 * the call each attempt it starts (started), each that moved on (attemptFailed) and how its answer ended
 * (answered), and answers a refusal, which the call records (refused).
 *
 * An upstream attempt is made on one connection: its path and key, the caller's headers as that protocol sends
 * them (signed where the protocol signs), the trace's traceparent, and the Relay (relay.ts) that sends it and
 * streams the answer back.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config.js';
import type { Clock } from '../domain/actor.js';
import type { EarlierAttempt } from '../domain/invocations/invocation-types.js';
import type { RouteRow } from '../domain/routes/route-types.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { protocolOf, protocolOfPath } from '../protocols/index.js';
import type { Protocol } from '../protocols/protocol.js';
import type { RequestLocals } from '../web/locals.js';
import { admit } from './admission.js';
import { answerHeaders, sendError } from './answers.js';
import { upstreamOf, type CacheEntry } from './auth-cache.js';
import type { CallMeter } from './call-meter.js';
import type { CallTrace } from './call-trace.js';
import { upstreamSearch } from './client-request.js';
import { upstreamHeaders } from './headers.js';
import type { MeteredCall } from './metered-call.js';
import type { GatewayTarget } from './path-safety.js';
import { Relay } from './relay.js';
import { Upload, type Sendable } from './upload.js';
import type { Failover } from './relay-answer.js';
import { RouteCalls, type AttemptMetrics } from './route-call.js';
import type { RouteRegistry } from './route-registry.js';
import type { createUpstreamPools } from './upstreams.js';

/** One call's request as its flow reads it: the same for each of its attempts. */
export interface CallContext {
  req: IncomingMessage;
  res: ServerResponse;
  locals: RequestLocals;
  call: MeteredCall;
  target: GatewayTarget;
  /** The protocol whose paths and bodies the call's endpoint is read by (a route's: its targets' body shape). */
  protocol: Protocol;
  /** Its body, being read: whole, or a multipart upload read on its way through (upload.ts). */
  body: Promise<Sendable>;
  /** The route it is called through, and its usable targets with their key's lookups; none: a connection's call. */
  route: RouteRow | undefined;
  usable: Map<string, CacheEntry> | undefined;
  /** A free call's model list, filtered by the strategy's allow-list (admission.ts). */
  rewriteJson: ((text: string) => string) | undefined;
  trace: CallTrace | undefined;
}

/** What differs between attempts: the connection (its key's lookup), the path and body sent, and the limits. */
export interface AttemptOf {
  entry: CacheEntry;
  providerPath: string;
  body: Sendable;
  timeoutMs: number;
  /** A route's attempt: the target's id (the invocation's attempts), and the answer's x-nexus-* headers. */
  connectionId?: string | undefined;
  answerHeaders?: string[] | undefined;
  failover?: Failover | undefined;
}

/** Sets a header of undici's list (name, value, ...; names in lower case), replacing the one there. */
function setHeader(headers: string[], name: string, value: string): void {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] === name) {
      headers[i + 1] = value;
      return;
    }
  }
  headers.push(name, value);
}

export interface CallFlowDeps {
  config: Config;
  clock: Clock;
  meter: CallMeter;
  secretBox: SecretBox;
  pools: ReturnType<typeof createUpstreamPools>;
  registry: RouteRegistry;
  metrics?: AttemptMetrics | undefined;
}

export class CallFlow {
  private readonly routes: RouteCalls;

  constructor(private readonly deps: CallFlowDeps) {
    this.routes = new RouteCalls({ ...deps, flow: this });
  }

  /** The call admitted, sent upstream and answered; or refused, its refusal answered and recorded. */
  async run(ctx: CallContext): Promise<void> {
    try {
      ctx.call.log?.request(ctx.req.rawHeaders);
      const body = await admit(this.deps.meter, ctx);
      const { call } = ctx;
      if (ctx.route) return await this.routes.relayRoute(ctx, body, ctx.route, ctx.usable!);
      // A connection with a retry policy has its calls' attempts made by a route's loop (route-call.ts).
      const retry = call.auth.connection_retry;
      if (retry) return await this.routes.relayConnection(ctx, body, retry);
      const timeoutMs = call.auth.upstream_timeout_ms ?? this.deps.config.upstreamTimeoutMs;
      await this.attempt(ctx, { entry: call.entry, providerPath: ctx.target.providerPath, body, timeoutMs });
      this.answer(ctx, protocolOf(call.auth.protocol_profile!));
    } catch (err) {
      this.refuse(ctx, err);
    }
  }

  /**
   * One upstream attempt, its request built (and signed where its protocol signs), the call under way on it;
   * resolves with its Relay once the attempt ended (answered, moved on, or broke).
   */
  async attempt(ctx: CallContext, a: AttemptOf): Promise<Relay> {
    const { req, res, locals, call, trace } = ctx;
    const row = a.entry.row!;
    const upstream = upstreamOf(a.entry, row, this.deps.secretBox);
    const protocol = protocolOf(row.protocol_profile!);
    const base = upstream.baseUrl;
    const method = req.method!;
    const path = `${base.pathname.replace(/\/$/, '')}/${a.providerPath}${upstreamSearch(ctx.target.search)}`;
    const headers = upstreamHeaders(req.rawHeaders, protocol, upstream.apiKey, a.body.length);
    // A signed protocol (bedrock.ts, SigV4) signs the request as it goes upstream.
    if (protocol.signRequest) {
      const body = a.body instanceof Upload ? Buffer.alloc(0) : a.body;
      await protocol.signRequest(upstream.apiKey, { method, url: new URL(path, base), body, headers });
    }
    // Traces on: the upstream's spans become children of the upstream call's (the client's traceparent is replaced).
    if (trace) setHeader(headers, 'traceparent', trace.upstreamStarted(protocol, call.inspector, method, base));
    const startedAt = this.deps.clock.now();
    const out = answerHeaders(locals.requestId, call, startedAt.getTime());
    if (a.answerHeaders) out.push(...a.answerHeaders);
    const relay = new Relay(res, {
      requestId: locals.requestId,
      pool: this.deps.pools.get(base),
      request: { method, path, headers, body: a.body, timeoutMs: a.timeoutMs },
      startedAt,
      answerHeaders: out,
      inspector: call.inspector,
      prepared: call.admitted.prepared,
      maskedKey: upstream.maskedKey,
      passedBack: protocol.passedBack,
      watcher: call,
      rewriteJson: ctx.rewriteJson,
      failover: a.failover,
      capture: call.log?.attempt(upstream.apiKey, upstream.maskedKey?.text),
    });
    // The answer's status is the upstream's once it began, unless the gateway refuses the answer instead (answer()).
    locals.upstream = relay;
    call.started(relay, a.connectionId);
    await relay.start();
    return relay;
  }

  /** A route's attempt moved on before any byte reached the client (`model`: the one its target was sent). */
  movedOn(ctx: CallContext, model: string): EarlierAttempt {
    return ctx.call.attemptFailed(model);
  }

  /** The call's answer is the last attempt's: settled, or refused in `errors`' shape (no answer came). */
  answer(ctx: CallContext, errors: Protocol): void {
    const { res, locals, call } = ctx;
    const refusal = call.answered();
    if (!refusal) return;
    locals.upstream = undefined;
    const { view, rateView } = call.admitted;
    const now = this.deps.clock.now().getTime();
    sendError(res, { locals, err: refusal, metered: call.inspector !== undefined, quota: view, rate: rateView, now, protocol: errors });
  }

  /**
   * Refused or failed after the key's access and connection were known: answered in the connection's error shape
   * (or, with no connection, that of the API its path belongs to), and recorded (REJECTED: no upstream call).
   */
  refuse(ctx: Pick<CallContext, 'res' | 'locals' | 'call' | 'target'>, err: unknown): void {
    const { res, locals, call } = ctx;
    const { meter, clock } = this.deps;
    const row = call.entry.row;
    const { startedAt, method } = call.start;
    sendError(res, {
      locals,
      err,
      metered: call.inspector !== undefined,
      quota: call.admitted.view ?? meter.quotaView(row, startedAt),
      rate: call.admitted.rateView ?? meter.rateView(row, startedAt),
      now: clock.now().getTime(),
      protocol: row?.protocol_profile ? protocolOf(row.protocol_profile) : protocolOfPath(method, ctx.target.route),
    });
    call.refused(err);
  }
}
