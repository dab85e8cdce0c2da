/**
 * One upstream attempt of an admitted call, on one connection: its path and key, the caller's headers as that
 * protocol sends them (signed where the protocol signs), the trace's traceparent, and a Relay that streams the
 * answer back. A plain call makes one (gateway.ts); a route's call makes one per target and retry (route-call.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SecretBox } from '../domain/security/secret-box.js';
import type { RequestLocals } from '../web/locals.js';
import { answerHeaders, sendError } from './answers.js';
import { upstreamOf, type CacheEntry } from './auth-cache.js';
import type { CallTrace } from './call-trace.js';
import { upstreamSearch } from './client-request.js';
import { upstreamHeaders } from './headers.js';
import type { MeteredCall } from './metered-call.js';
import type { GatewayTarget } from './path-safety.js';
import { protocolOf } from '../protocols/index.js';
import type { Protocol } from '../protocols/protocol.js';
import { Relay, type Failover } from './relay.js';
import type { createUpstreamPools } from './upstreams.js';

/** The request an attempt relays: the same for every attempt of a call. */
export interface CallContext {
  req: IncomingMessage;
  res: ServerResponse;
  locals: RequestLocals;
  call: MeteredCall;
  target: GatewayTarget;
  rewriteJson: ((text: string) => string) | undefined;
  trace: CallTrace | undefined;
}

/** What differs between attempts: the connection (its key's lookup), the path and body sent, and the limits. */
export interface AttemptOf {
  entry: CacheEntry;
  providerPath: string;
  body: Buffer;
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

export function createUpstreamAttempts(deps: {
  clock: { now(): Date };
  secretBox: SecretBox;
  pools: ReturnType<typeof createUpstreamPools>;
}) {
  const { clock, secretBox, pools } = deps;
  return {
    /** Relays one attempt; returns its Relay once the attempt ended (answered, moved on, or broke). */
    async start(ctx: CallContext, a: AttemptOf): Promise<Relay> {
      const { req, res, locals, call, trace } = ctx;
      const row = a.entry.row!;
      const upstream = upstreamOf(a.entry, row, secretBox);
      const protocol = protocolOf(row.protocol_profile!);
      const base = upstream.baseUrl;
      const path = `${base.pathname.replace(/\/$/, '')}/${a.providerPath}${upstreamSearch(ctx.target.search)}`;
      const headers = upstreamHeaders(req.rawHeaders, protocol, upstream.apiKey, a.body.length);
      // A signed protocol (bedrock.ts, SigV4) signs the request as it goes upstream.
      if (protocol.signRequest)
        await protocol.signRequest(upstream.apiKey, { method: req.method!, url: new URL(path, base), body: a.body, headers });
      // Traces on: the upstream's spans become children of the upstream call's (the client's traceparent is replaced).
      if (trace) setHeader(headers, 'traceparent', trace.upstreamStarted(protocol, call.inspector, req.method!, base));
      const out = answerHeaders(locals.requestId, call, clock.now().getTime());
      if (a.answerHeaders) out.push(...a.answerHeaders);
      const relay = new Relay(res, {
        requestId: locals.requestId,
        answerHeaders: out,
        inspector: call.inspector,
        prepared: call.prepared,
        maskedKey: upstream.maskedKey,
        passedBack: protocol.passedBack,
        watcher: call,
        rewriteJson: ctx.rewriteJson,
        failover: a.failover,
      });
      // The answer's status is the upstream's once it began, unless the gateway refuses the answer instead (answer()).
      locals.upstreamAnswered = () => relay.status !== undefined;
      call.started(relay, clock.now(), a.connectionId);
      await relay.start(pools.get(base), { method: req.method!, path, headers, body: a.body, timeoutMs: a.timeoutMs });
      return relay;
    },

    /** The call's answer is the last attempt's: settled, or refused in `errors`' shape (the output bound cut it). */
    answer(ctx: CallContext, errors: Protocol): void {
      const { res, locals, call } = ctx;
      const refusal = call.answered();
      if (!refusal) return;
      locals.upstreamAnswered = () => false;
      sendError(res, locals, refusal, call.inspector !== undefined, call.view, call.rateView, clock.now().getTime(), errors);
    },
  };
}

export type UpstreamAttempts = ReturnType<typeof createUpstreamAttempts>;
