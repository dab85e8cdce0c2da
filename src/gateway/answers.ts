/**
 * The headers the gateway puts on its answers: on a relayed answer (its request id, the metering status,
 * the quota and rate-limit headers, the output cap it lowered), and on its own Error answer (the
 * shared Error body of src/http/api.ts).
 */
import type { ServerResponse } from 'node:http';
import { rateHeaders, type RateView } from '../domain/rate-limits/rate-types.js';
import { isRefusal, toAppError } from '../errors.js';
import { writeError } from '../web/error-response.js';
import type { RequestLocals } from '../web/locals.js';
import type { MeteredCall, QuotaView } from './metered-call.js';
import type { Protocol } from '../protocols/protocol.js';

/** The gateway's headers of a call's relayed answer (name, value, ...), to which the relay adds the upstream's. */
export function answerHeaders(requestId: string, call: MeteredCall, nowMs: number): string[] {
  const out = ['x-nexus-request-id', requestId, 'x-nexus-metering-status', call.inspector !== undefined ? 'metered' : 'unmetered'];
  const view = call.view;
  if (view) out.push('x-nexus-quota-remaining', view.remaining.toString(), 'x-nexus-quota-reset', view.reset.toISOString());
  const cap = call.prepared?.outputCap;
  if (cap) out.push('x-nexus-output-cap', `${cap.sent}; requested=${cap.requested}`);
  rateHeaders(call.rateView, nowMs, out);
  return out;
}

/**
 * The gateway's Error answer, with its headers, in the connection's protocol's error shape when it has one
 * (`protocol`: the connection's, once known); a stream already under way is cut instead.
 */
export function sendError(
  res: ServerResponse,
  locals: RequestLocals,
  err: unknown,
  metered: boolean,
  view: QuotaView | undefined,
  rateView: RateView | undefined,
  nowMs: number,
  protocol?: Protocol,
): void {
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
  const headers = rateHeaders(rateView, nowMs, []);
  for (let i = 0; i < headers.length; i += 2) res.setHeader(headers[i]!, headers[i + 1]!);
  // The official SDKs retry 409, 429 and 5xx on their own (three calls, seconds of backoff); none of the
  // gateway's own refusals changes by retrying, so they are told not to (a 502 may, and stays silent),
  // except one that says when it frees (a rate limit's retry_after: writeError sends it as Retry-After, and
  // the SDKs wait that long). Which SDKs read x-should-retry: docs/sdk-retries.md.
  const appError = toAppError(err);
  if (appError.extras.retry_after !== undefined) {
    res.setHeader('x-should-retry', 'true');
  } else if (isRefusal(appError)) {
    res.setHeader('x-should-retry', 'false');
  }
  writeError(res, err, locals, protocol?.errorShape);
}
