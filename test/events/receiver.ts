/**
 * A webhook receiver on 127.0.0.1, as an application would write one: it verifies each delivery with the
 * `standardwebhooks` package and keeps what came. How it answers is set per test (`answer`), to play a
 * receiver that is down, gone, redirecting, rate-limited or hanging. endpointFor subscribes it through the
 * Admin API; acceptedOf waits for what it accepted.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { expect } from 'vitest';
import type { WebhookEventType } from '../../generated/client/types.gen.js';
import { until } from '../gateway/gateway-support.js';
import { closeServer, listenLocal } from '../support/local-server.js';
import { createWebhookEndpoint } from '../support/sdk.js';
import type { TestApp } from '../support/test-app.js';

interface Delivery {
  id: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** What `standardwebhooks` verified with the secret the test gave (undefined: it refused the signature). */
  verified: { type: string; timestamp: string; data: Record<string, unknown> } | undefined;
  /** The status this receiver answered. */
  status: number;
}

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** The secrets the receiver verifies with (the first that verifies counts). */
  secrets: string[];
  /** Answers each request; default 200. Returning null leaves it hanging. */
  answer: (d: Omit<Delivery, 'status'>, res: ServerResponse) => number | null;
  /** Deliveries it accepted (2xx) with a valid signature, in order. */
  accepted(): Delivery[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const receiver: Receiver = {
    url: '',
    deliveries: [],
    secrets: [],
    answer: () => 200,
    accepted: () => receiver.deliveries.filter((d) => d.status >= 200 && d.status < 300 && d.verified),
    async close() {
      for (const res of hanging) res.destroy();
      await closeServer(server);
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let verified: Delivery['verified'];
      for (const secret of receiver.secrets) {
        try {
          verified = new Webhook(secret).verify(body, req.headers as Record<string, string>) as Delivery['verified'];
          break;
        } catch {
          // not this secret
        }
      }
      const seen = { id: String(req.headers['webhook-id']), headers: req.headers, body, verified };
      const status = receiver.answer(seen, res);
      if (status === null) {
        hanging.add(res);
        receiver.deliveries.push({ ...seen, status: 0 });
        return;
      }
      receiver.deliveries.push({ ...seen, status });
      if (!res.headersSent) res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(status < 300 ? 'ok' : `answer ${status}`);
    });
  });
  receiver.url = `${await listenLocal(server)}/hooks`;
  return receiver;
}

/** An endpoint of the workspace for the receiver, made through the Admin API; the receiver learns its secret. */
export async function endpointFor(app: TestApp, workspaceId: string, r: Receiver, eventTypes?: WebhookEventType[]) {
  const res = await createWebhookEndpoint({
    client: app.client,
    path: { workspaceId },
    body: { url: r.url, description: 'test receiver', ...(eventTypes ? { eventTypes } : {}) },
  });
  expect(res.response.status).toBe(201);
  r.secrets.push(res.data!.secret);
  return res.data!;
}

/** Waits until the receiver accepted `n` verified deliveries of `type` (and gives them). */
export async function acceptedOf(r: Receiver, type: string, n: number, ms = 10_000) {
  await until(async () => r.accepted().filter((d) => d.verified!.type === type).length >= n, ms);
  return r.accepted().filter((d) => d.verified!.type === type);
}

/**
 * The messages of `type` it accepted, each once: an attempt that timed out on a busy host is delivered again with the
 * same webhook-id, the same message (at least once, as Standard Webhooks receivers expect), not a second cause.
 */
export function acceptedMessages(r: Receiver, type?: string): Delivery[] {
  const seen = new Set<string>();
  return r.accepted().filter((d) => (type === undefined || d.verified!.type === type) && !seen.has(d.id) && seen.add(d.id));
}

/** Waits until the receiver accepted `n` messages of `type`, each counted once (acceptedMessages), and gives them. */
export async function acceptedMessagesOf(r: Receiver, type: string, n: number, ms = 10_000) {
  await until(async () => acceptedMessages(r, type).length >= n, ms);
  return acceptedMessages(r, type);
}
