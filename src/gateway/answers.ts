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
import type { MeteredCall } from './metered-call.js';
import type { Protocol } from '../protocols/protocol.js';

/** What the answer's quota headers say: what the access has left, and when its period resets. */
export interface QuotaView {
  remaining: bigint;
  reset: Date;
}

/** The x-nexus-quota-reset text of each period end seen (the cached key row's Date, the same for its calls). */
const resetTexts = new WeakMap<Date, { ms: number; text: string }>();

/** A period end as x-nexus-quota-reset says it: written once per Date (Date#toISOString costs a call about 0.5 µs). */
function resetText(reset: Date): string {
  const ms = reset.getTime();
  const known = resetTexts.get(reset);
  if (known?.ms === ms) return known.text;
  const text = reset.toISOString();
  resetTexts.set(reset, { ms, text });
  return text;
}

/** The gateway's headers of a call's relayed answer (name, value, ...), to which the relay adds the upstream's. */
export function answerHeaders(requestId: string, call: MeteredCall, nowMs: number): string[] {
  const out = ['x-nexus-request-id', requestId, 'x-nexus-metering-status', call.inspector !== undefined ? 'metered' : 'unmetered'];
  const { view, prepared, rateView } = call.admitted;
  if (view) out.push('x-nexus-quota-remaining', view.remaining.toString(), 'x-nexus-quota-reset', resetText(view.reset));
  const cap = prepared?.outputCap;
  if (cap) out.push('x-nexus-output-cap', `${cap.sent}; requested=${cap.requested}`);
  rateHeaders(rateView, nowMs, out);
  return out;
}

/** A gateway Error answer: its request, the refusal, and what its headers say. */
export interface ErrorAnswer {
  locals: RequestLocals;
  err: unknown;
  /** The call's endpoint is metered (x-nexus-metering-status). */
  metered: boolean;
  /** The key's quota and rate-limit headers, when it is known valid. */
  quota?: QuotaView | undefined;
  rate?: RateView | undefined;
  /** Now, in ms (the rate-limit headers' reset). */
  now: number;
  /** The API whose error shape it takes: the connection's, once known; none: the shared Error body. */
  protocol?: Protocol | undefined;
}

/** The gateway's Error answer, with its headers, in its protocol's error shape when it has one; a stream already under way is cut instead. */
export function sendError(res: ServerResponse, answer: ErrorAnswer): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { locals, err, quota } = answer;
  res.setHeader('x-request-id', locals.requestId);
  res.setHeader('x-nexus-request-id', locals.requestId);
  res.setHeader('x-nexus-metering-status', answer.metered ? 'metered' : 'unmetered');
  if (quota) {
    res.setHeader('x-nexus-quota-remaining', quota.remaining.toString());
    res.setHeader('x-nexus-quota-reset', resetText(quota.reset));
  }
  const headers = rateHeaders(answer.rate, answer.now, []);
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
  writeError(res, err, locals, answer.protocol?.errorShape);
}
