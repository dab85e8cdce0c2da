/**
 * The delivery workers: every process runs one. Each round claims due messages (SKIP LOCKED, so processes
 * never take the same one; a claim moves next_attempt_at ahead by the claim time, so a message whose process
 * died mid-delivery is taken by another after it) and sends them as Standard Webhooks, with the event's id as
 * `webhook-id` on every attempt.
 *
 * - A round's messages to one endpoint go one after another, oldest first; those of different endpoints at once.
 *   A failure, or a claim without room left for another send, gives the endpoint's rest back to the next round.
 * - 2xx: delivered, and the endpoint's other messages waiting for a later retry are due at once (the receiver is
 *   back: they go oldest first, not hours later at their slot). Anything else is a failure: a 3xx too (redirects
 *   are not followed), a receiver that has not answered within the timeout (15 s), a refused address (the
 *   provider URLs' SSRF guard, at connect time).
 * - A failure retries on the schedule (Svix's: now, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), or after the
 *   Retry-After of a 429 or 503; the last one leaves the message FAILED (a replay queues it again).
 * - 410 Gone, or failures without a success for the failure window (five days), disable the endpoint, with
 *   an audit entry and a webhook_endpoint.disabled event (to the workspace's other endpoints).
 * Nothing here runs in a request: a slow receiver only holds this loop's own slot.
 */
import { Agent, request } from 'undici';
import type { Config } from '../../config.js';
import type { Db } from '../../db/database.js';
import { newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import { systemActor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { guardedLookup, hostOf, isRefusedHost } from '../security/upstream-guard.js';
import type { Events } from './outbox.js';
import type { ClaimedMessage, WebhookRepo } from './webhook-repo.js';
import type { WebhookService } from './webhook-service.js';
import { webhookHeaders } from './webhook-signature.js';

/** What an attempt keeps of the receiver's answer. */
const MAX_RESPONSE_BODY = 1024;
const BATCH = 20;
/** A receiver's Retry-After is honoured up to a day. */
const MAX_RETRY_AFTER_MS = 86_400_000;

export interface DeliveryResult {
  ok: boolean;
  status?: number;
  body?: string;
  error?: string;
  latencyMs: number;
  /** Seconds the receiver asked to wait (Retry-After of a 429 or 503). */
  retryAfterMs?: number;
}

/** Retry-After as seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now: Date): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}

async function readSome(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= MAX_RESPONSE_BODY) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).toString('utf8').slice(0, MAX_RESPONSE_BODY);
}

export function createWebhookDelivery(deps: {
  db: Db;
  webhookRepo: WebhookRepo;
  webhooks: WebhookService;
  events: Events;
  audit: AuditService;
  config: Config;
  clock: Clock;
  logger: Logger;
}) {
  const { db, webhookRepo: repo, webhooks, events, audit, config, clock, logger } = deps;
  const schedule = config.eventsRetryScheduleMs;
  const timeoutMs = config.eventsTimeoutMs;
  const agent = new Agent({
    connect: { lookup: guardedLookup(config.allowPrivateUpstreams), timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  // Stopping the process cuts the sends under way and gives their claims back: another process (or this one's next
  // start) sends them at its next round, not when the claim would have run out (a minute by default). A receiver
  // that had the message before the cut gets it again, as after any lost answer (it dedupes by the message id).
  const stopping = new AbortController();

  async function send(message: ClaimedMessage, now: Date): Promise<DeliveryResult> {
    const started = performance.now();
    const latencyMs = () => Math.round(performance.now() - started);
    const body = JSON.stringify({ type: message.type, timestamp: message.event_created_at.toISOString(), data: message.data });
    const secrets = webhooks.signingSecrets({ ...message, id: message.endpoint_id }, now);
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'Nexus-Webhooks/1',
      ...webhookHeaders(secrets, message.event_id, Math.floor(now.getTime() / 1000), body),
    };
    if (isRefusedHost(hostOf(new URL(message.url)), config.allowPrivateUpstreams)) {
      return { ok: false, error: 'the endpoint address is private and NEXUS_ALLOW_PRIVATE_UPSTREAMS is not set', latencyMs: 0 };
    }
    try {
      // undici.request never follows a redirect: a 3xx is this attempt's answer, a failure.
      const res = await request(message.url, {
        method: 'POST',
        headers,
        body,
        dispatcher: agent,
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), stopping.signal]),
      });
      const text = await readSome(res.body);
      const status = res.statusCode;
      const retry = status === 429 || status === 503 ? retryAfterMs(res.headers['retry-after'], now) : undefined;
      return {
        ok: status >= 200 && status < 300,
        status,
        body: text,
        latencyMs: latencyMs(),
        ...(retry !== undefined ? { retryAfterMs: retry } : {}),
      };
    } catch (err) {
      const e = err as Error & { code?: string };
      const timedOut =
        e.name === 'TimeoutError' || e.name === 'AbortError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT';
      return { ok: false, error: timedOut ? `no answer within ${timeoutMs} ms` : (e.code ?? e.message), latencyMs: latencyMs() };
    }
  }

  /** Disables the endpoint (in `tx`), with its audit entry and event; its queued messages fail. */
  async function disableEndpoint(tx: Db, message: ClaimedMessage, reason: 'failing' | 'gone', now: Date): Promise<void> {
    await repo.updateEndpoint(message.endpoint_id, { status: 'DISABLED', disabled_reason: reason, updated_at: now }, tx);
    await repo.failPending(message.endpoint_id, tx);
    await audit.record(
      systemActor('webhook-delivery'),
      {
        action: 'webhook_endpoint.disabled',
        resourceType: 'webhook_endpoint',
        resourceId: message.endpoint_id,
        workspaceId: message.workspace_id,
        changes: { reason, ...(message.failing_since ? { failingSince: message.failing_since.toISOString() } : {}) },
      },
      tx,
    );
    await events.emit(tx, message.workspace_id, 'webhook_endpoint.disabled', {
      webhookEndpointId: message.endpoint_id,
      reason,
      ...(message.failing_since ? { failingSince: message.failing_since.toISOString() } : {}),
    });
    logger.warn({ msg: 'webhook endpoint disabled', endpointId: message.endpoint_id, reason });
  }

  /**
   * Sends a claimed message (claimed until `claimedUntil`) and records the attempt; whether the endpoint's next
   * message may follow in this round (not after a failure, nor once the process stops).
   */
  async function deliver(message: ClaimedMessage, claimedUntil: Date): Promise<boolean> {
    const now = clock.now();
    if (message.endpoint_status !== 'ACTIVE' || message.deleted_at) {
      await repo.updateMessage(message.event_id, message.endpoint_id, { status: 'FAILED', next_attempt_at: null });
      return true;
    }
    const result = await send(message, now);
    if (stopping.signal.aborted) {
      await repo.releaseClaim(message.event_id, message.endpoint_id, claimedUntil, now).catch((err: Error) => {
        logger.warn({ msg: 'could not give back a cut delivery; it is sent when its claim runs out', error: err.message });
      });
      return false;
    }
    const done = clock.now();
    const attempts = message.attempt_count + 1;
    await db.transaction(async (tx) => {
      await repo.recordAttempt(
        {
          id: newId(),
          event_id: message.event_id,
          endpoint_id: message.endpoint_id,
          workspace_id: message.workspace_id,
          outcome: result.ok ? 'SUCCEEDED' : 'FAILED',
          response_status: result.status ?? null,
          response_body: result.body ?? null,
          latency_ms: result.latencyMs,
          error: result.error ?? null,
          created_at: done,
        },
        tx,
      );
      if (result.ok) {
        await repo.updateMessage(
          message.event_id,
          message.endpoint_id,
          { status: 'DELIVERED', attempt_count: attempts, next_attempt_at: null, last_attempt_at: done },
          tx,
        );
        if (message.failing_since) await repo.updateEndpoint(message.endpoint_id, { failing_since: null }, tx);
        await repo.wakePending(message.endpoint_id, done, tx);
        return;
      }
      const gone = result.status === 410;
      const last = gone || attempts >= schedule.length;
      const wait = result.retryAfterMs !== undefined ? Math.min(result.retryAfterMs, MAX_RETRY_AFTER_MS) : schedule[attempts];
      await repo.updateMessage(
        message.event_id,
        message.endpoint_id,
        {
          status: last ? 'FAILED' : 'PENDING',
          attempt_count: attempts,
          next_attempt_at: last ? null : new Date(done.getTime() + (wait ?? 0)),
          last_attempt_at: done,
        },
        tx,
      );
      // The endpoint row, locked: two processes failing on it at once decide its state one after the other.
      const endpoint = await repo.findEndpointForUpdate(message.endpoint_id, tx);
      if (!endpoint || endpoint.status !== 'ACTIVE') return;
      const failingSince = endpoint.failing_since ?? done;
      if (gone) await disableEndpoint(tx, { ...message, failing_since: failingSince }, 'gone', done);
      else if (done.getTime() - failingSince.getTime() >= config.eventsDisableAfterMs) {
        await disableEndpoint(tx, { ...message, failing_since: failingSince }, 'failing', done);
      } else if (!endpoint.failing_since) await repo.updateEndpoint(message.endpoint_id, { failing_since: done }, tx);
    });
    return result.ok;
  }

  /**
   * One endpoint's messages of a round (oldest first), one after another while they succeed and the claim has room
   * for another whole send (the first is sent whatever); the rest are given back, due at once, to the next round (of
   * this process or another).
   */
  async function deliverInTurn(messages: ClaimedMessage[], claimedUntil: Date): Promise<void> {
    let i = 0;
    for (; i < messages.length; i++) {
      if (i > 0 && clock.now().getTime() + timeoutMs > claimedUntil.getTime()) break;
      const message = messages[i]!;
      const next = await deliver(message, claimedUntil).catch((err: Error) => {
        logger.warn({ msg: 'webhook delivery failed to record', eventId: message.event_id, error: err.message });
        return false;
      });
      if (!next) {
        i++;
        break;
      }
    }
    const rest = messages.slice(i);
    if (rest.length === 0) return;
    const now = clock.now();
    await Promise.all(
      rest.map((m) =>
        repo.releaseClaim(m.event_id, m.endpoint_id, claimedUntil, now).catch((err: Error) => {
          logger.warn({ msg: 'could not give back a webhook message; it is sent when its claim runs out', error: err.message });
        }),
      ),
    );
  }

  /** One round: the due messages claimed (at most a batch) and sent, each endpoint's in turn; how many. */
  async function runOnce(): Promise<number> {
    const now = clock.now();
    const until = new Date(now.getTime() + config.eventsClaimMs);
    const claimed = await repo.claimDue(now, until, BATCH);
    const byEndpoint = new Map<string, ClaimedMessage[]>();
    for (const m of claimed) {
      const messages = byEndpoint.get(m.endpoint_id);
      if (messages) messages.push(m);
      else byEndpoint.set(m.endpoint_id, [m]);
    }
    await Promise.all([...byEndpoint.values()].map((messages) => deliverInTurn(messages, until)));
    return claimed.length;
  }

  return {
    runOnce,
    /** Runs rounds until stopped: at once while they find work, else every NEXUS_EVENTS_POLL_MS. */
    start(): () => Promise<void> {
      let stopped = false;
      let timer: NodeJS.Timeout | undefined;
      let running: Promise<void> | undefined;
      const loop = () => {
        running = runOnce()
          .catch((err: Error) => {
            logger.warn({ msg: 'webhook delivery round failed', error: err.message });
            return 0;
          })
          .then((n) => {
            if (stopped) return;
            timer = setTimeout(loop, n === BATCH ? 0 : config.eventsPollMs);
            timer.unref();
          });
      };
      loop();
      return async () => {
        stopped = true;
        clearTimeout(timer);
        stopping.abort();
        await running;
        await agent.close();
      };
    },
  };
}
