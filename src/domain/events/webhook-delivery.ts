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
 * Nothing here runs in a request: a slow receiver only holds this loop's own slot. The loop itself (a round at
 * once after a full one, else every NEXUS_EVENTS_POLL_MS) is the jobs module's (src/jobs.ts): it runs runOnce(),
 * and at a stop cut() then close().
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
/** Messages a round claims at most. */
const BATCH = 20;
/** A receiver's Retry-After is honoured up to a day. */
const MAX_RETRY_AFTER_MS = 86_400_000;

interface DeliveryResult {
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

/** What the delivery workers read and write through. */
export interface WebhookDeliveryDeps {
  db: Db;
  webhookRepo: WebhookRepo;
  webhooks: WebhookService;
  events: Events;
  audit: AuditService;
  config: Config;
  clock: Clock;
  logger: Logger;
}

/** Whether an error is a send that ran out of time (or was cut). */
function timedOut(e: Error & { code?: string }): boolean {
  return e.name === 'TimeoutError' || e.name === 'AbortError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT';
}

/** The process's delivery worker: its rounds, each message's send and the record of its attempt. */
class WebhookDelivery {
  /** Messages a round claims at most: a round that claimed as many is followed by another at once. */
  readonly batch = BATCH;
  private readonly agent: Agent;
  // Stopping the process cuts the sends under way and gives their claims back: another process (or this one's next
  // start) sends them at its next round, not when the claim would have run out (a minute by default). A receiver
  // that had the message before the cut gets it again, as after any lost answer (it dedupes by the message id).
  private readonly stopping = new AbortController();

  constructor(private readonly deps: WebhookDeliveryDeps) {
    const timeoutMs = deps.config.eventsTimeoutMs;
    this.agent = new Agent({
      connect: { lookup: guardedLookup(deps.config.allowPrivateUpstreams), timeout: timeoutMs },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  }

  /** One round: the due messages claimed (at most a batch) and sent, each endpoint's in turn; how many. */
  async runOnce(): Promise<number> {
    const now = this.deps.clock.now();
    const until = new Date(now.getTime() + this.deps.config.eventsClaimMs);
    const claimed = await this.deps.webhookRepo.claimDue(now, until, BATCH);
    const byEndpoint = new Map<string, ClaimedMessage[]>();
    for (const m of claimed) {
      const messages = byEndpoint.get(m.endpoint_id);
      if (messages) messages.push(m);
      else byEndpoint.set(m.endpoint_id, [m]);
    }
    await Promise.all([...byEndpoint.values()].map((messages) => this.deliverInTurn(messages, until)));
    return claimed.length;
  }

  /** Cuts the sends under way (the process stops): their claims are given back, and the round ends. */
  cut(): void {
    this.stopping.abort();
  }

  /** Closes the connections to the receivers, once the last round has ended. */
  async close(): Promise<void> {
    await this.agent.close();
  }

  /**
   * One endpoint's messages of a round (oldest first), one after another while they succeed and the claim has room
   * for another whole send (the first is sent whatever); the rest are given back, due at once, to the next round (of
   * this process or another).
   */
  private async deliverInTurn(messages: ClaimedMessage[], claimedUntil: Date): Promise<void> {
    const { clock, config, logger } = this.deps;
    let i = 0;
    for (; i < messages.length; i++) {
      if (i > 0 && clock.now().getTime() + config.eventsTimeoutMs > claimedUntil.getTime()) break;
      const message = messages[i]!;
      const next = await this.deliver(message, claimedUntil).catch((err: Error) => {
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
        this.deps.webhookRepo.releaseClaim(m.event_id, m.endpoint_id, claimedUntil, now).catch((err: Error) => {
          logger.warn({ msg: 'could not give back a webhook message; it is sent when its claim runs out', error: err.message });
        }),
      ),
    );
  }

  /**
   * Sends a claimed message (claimed until `claimedUntil`) and records the attempt; whether the endpoint's next
   * message may follow in this round (not after a failure, nor once the process stops).
   */
  private async deliver(message: ClaimedMessage, claimedUntil: Date): Promise<boolean> {
    const { db, webhookRepo: repo, clock, logger } = this.deps;
    const now = clock.now();
    if (message.endpoint_status !== 'ACTIVE' || message.deleted_at) {
      await repo.updateMessage(message.event_id, message.endpoint_id, { status: 'FAILED', next_attempt_at: null });
      return true;
    }
    const result = await this.send(message, now);
    if (this.stopping.signal.aborted) {
      await repo.releaseClaim(message.event_id, message.endpoint_id, claimedUntil, now).catch((err: Error) => {
        logger.warn({ msg: 'could not give back a cut delivery; it is sent when its claim runs out', error: err.message });
      });
      return false;
    }
    const done = clock.now();
    await db.transaction(async (tx) => {
      await this.recordAttempt(tx, message, result, done);
      if (result.ok) await this.delivered(tx, message, done);
      else await this.failed(tx, message, result, done);
    });
    return result.ok;
  }

  /** Sends a message as a Standard Webhook, signed with its endpoint's secrets; what came of it. */
  private async send(message: ClaimedMessage, now: Date): Promise<DeliveryResult> {
    const { webhooks, config } = this.deps;
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
    return this.post(message.url, headers, body, now);
  }

  /** The POST itself: the receiver's answer, or why there was none. */
  private async post(url: string, headers: Record<string, string>, body: string, now: Date): Promise<DeliveryResult> {
    const timeoutMs = this.deps.config.eventsTimeoutMs;
    const started = performance.now();
    const latencyMs = () => Math.round(performance.now() - started);
    try {
      // undici.request never follows a redirect: a 3xx is this attempt's answer, a failure.
      const res = await request(url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.agent,
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), this.stopping.signal]),
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
      return { ok: false, error: timedOut(e) ? `no answer within ${timeoutMs} ms` : (e.code ?? e.message), latencyMs: latencyMs() };
    }
  }

  private async recordAttempt(tx: Db, message: ClaimedMessage, result: DeliveryResult, done: Date): Promise<void> {
    await this.deps.webhookRepo.recordAttempt(
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
  }

  /** A 2xx: the message is delivered, and the endpoint's messages waiting for a retry are due at once. */
  private async delivered(tx: Db, message: ClaimedMessage, done: Date): Promise<void> {
    const repo = this.deps.webhookRepo;
    await repo.updateMessage(
      message.event_id,
      message.endpoint_id,
      { status: 'DELIVERED', attempt_count: message.attempt_count + 1, next_attempt_at: null, last_attempt_at: done },
      tx,
    );
    if (message.failing_since) await repo.updateEndpoint(message.endpoint_id, { failing_since: null }, tx);
    await repo.wakePending(message.endpoint_id, done, tx);
  }

  /** A failure: the message's next attempt (or none: FAILED), and the endpoint disabled if it is gone or failing too long. */
  private async failed(tx: Db, message: ClaimedMessage, result: DeliveryResult, done: Date): Promise<void> {
    const repo = this.deps.webhookRepo;
    const schedule = this.deps.config.eventsRetryScheduleMs;
    const attempts = message.attempt_count + 1;
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
    await this.judgeEndpoint(tx, message, gone, done);
  }

  /** After a failure: the endpoint disabled (410, or no success for the failure window), or marked failing since now. */
  private async judgeEndpoint(tx: Db, message: ClaimedMessage, gone: boolean, done: Date): Promise<void> {
    const repo = this.deps.webhookRepo;
    // The endpoint row, locked: two processes failing on it at once decide its state one after the other.
    const endpoint = await repo.findEndpointForUpdate(message.endpoint_id, tx);
    if (!endpoint || endpoint.status !== 'ACTIVE') return;
    const failingSince = endpoint.failing_since ?? done;
    if (gone) await this.disableEndpoint(tx, { ...message, failing_since: failingSince }, 'gone', done);
    else if (done.getTime() - failingSince.getTime() >= this.deps.config.eventsDisableAfterMs) {
      await this.disableEndpoint(tx, { ...message, failing_since: failingSince }, 'failing', done);
    } else if (!endpoint.failing_since) await repo.updateEndpoint(message.endpoint_id, { failing_since: done }, tx);
  }

  /** Disables the endpoint (in `tx`), with its audit entry and event; its queued messages fail. */
  private async disableEndpoint(tx: Db, message: ClaimedMessage, reason: 'failing' | 'gone', now: Date): Promise<void> {
    const { webhookRepo: repo, audit, events, logger } = this.deps;
    await repo.updateEndpoint(message.endpoint_id, { status: 'DISABLED', disabled_reason: reason, updated_at: now }, tx);
    await repo.failPending(message.endpoint_id, tx);
    const failingSince = message.failing_since ? { failingSince: message.failing_since.toISOString() } : {};
    await audit.record(
      systemActor('webhook-delivery'),
      {
        action: 'webhook_endpoint.disabled',
        resourceType: 'webhook_endpoint',
        resourceId: message.endpoint_id,
        workspaceId: message.workspace_id,
        changes: { reason, ...failingSince },
      },
      tx,
    );
    await events.emit(tx, message.workspace_id, 'webhook_endpoint.disabled', {
      webhookEndpointId: message.endpoint_id,
      reason,
      ...failingSince,
    });
    logger.warn({ msg: 'webhook endpoint disabled', endpointId: message.endpoint_id, reason });
  }
}

export function createWebhookDelivery(deps: WebhookDeliveryDeps): WebhookDelivery {
  return new WebhookDelivery(deps);
}
