/**
 * A local fake of the Paddle Billing API: the credential check, customers (by
 * exact email; a second with the same email is a 409, as at Paddle),
 * transactions (checkout), subscription reads and listing. Events are signed in the test with
 * HMAC-SHA256 and checked against @paddle/paddle-node-sdk's own verifier.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { closeServer, listenLocal } from '../support/local-server.js';
import type { RecordedRequest } from './fake-stripe.js';

const rid = (prefix: string) => `${prefix}_01${randomBytes(12).toString('hex')}`;
const iso = (d: Date | string) => new Date(d).toISOString();

export interface FakePaddleSubscription {
  id: string;
  status: string;
  customer_id: string;
  custom_data: Record<string, string> | null;
  items: { status: string; quantity: number; price: { id: string; product_id: string } }[];
  current_billing_period: { starts_at: string; ends_at: string } | null;
  scheduled_change: { action: string; effective_at: string; resume_at: string | null } | null;
  canceled_at: string | null;
  created_at: string;
  updated_at: string;
}

export class FakePaddle {
  readonly validKeys = new Set<string>();
  /** price id -> product id */
  readonly prices = new Map<string, string>();
  readonly transactions = new Map<string, Record<string, any>>();
  /** customer id -> email */
  readonly customers = new Map<string, string>();
  readonly subscriptions = new Map<string, FakePaddleSubscription>();
  readonly requests: RecordedRequest[] = [];
  private server: Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.url = await listenLocal(this.server);
    return this;
  }

  close(): Promise<void> {
    return closeServer(this.server);
  }

  /** The customer paid the transaction: Paddle creates the subscription, copying custom_data. */
  completeTransaction(txnId: string, period: { start: Date | string; end: Date | string }, at: Date | string): FakePaddleSubscription {
    const txn = this.transactions.get(txnId);
    if (!txn) throw new Error(`no transaction ${txnId}`);
    const priceId = txn.items[0].price_id as string;
    const sub: FakePaddleSubscription = {
      id: rid('sub'),
      status: 'active',
      customer_id: txn.customer_id ?? rid('ctm'),
      custom_data: txn.custom_data ?? null,
      items: [{ status: 'active', quantity: 1, price: { id: priceId, product_id: this.prices.get(priceId)! } }],
      current_billing_period: { starts_at: iso(period.start), ends_at: iso(period.end) },
      scheduled_change: null,
      canceled_at: null,
      created_at: iso(at),
      updated_at: iso(at),
    };
    this.subscriptions.set(sub.id, sub);
    txn.status = 'completed';
    txn.subscription_id = sub.id;
    return this.snapshot(sub.id);
  }

  update(
    id: string,
    at: Date | string,
    change: { status?: string; period?: { start: Date | string; end: Date | string }; cancelAtPeriodEnd?: boolean; price?: string },
  ): FakePaddleSubscription {
    const sub = this.subscriptions.get(id)!;
    if (change.status) sub.status = change.status;
    if (change.status === 'canceled') sub.canceled_at = iso(at);
    if (change.period) sub.current_billing_period = { starts_at: iso(change.period.start), ends_at: iso(change.period.end) };
    if (change.price) sub.items[0]!.price = { id: change.price, product_id: this.prices.get(change.price)! };
    if (change.cancelAtPeriodEnd !== undefined) {
      sub.scheduled_change = change.cancelAtPeriodEnd
        ? { action: 'cancel', effective_at: sub.current_billing_period!.ends_at, resume_at: null }
        : null;
    }
    sub.updated_at = iso(at);
    return this.snapshot(id);
  }

  snapshot(id: string): FakePaddleSubscription {
    return JSON.parse(JSON.stringify(this.subscriptions.get(id)));
  }

  event(type: string, data: unknown, occurredAt: Date | string): { id: string; body: string } {
    const id = rid('evt');
    return {
      id,
      body: JSON.stringify({ event_id: id, event_type: type, occurred_at: iso(occurredAt), notification_id: rid('ntf'), data }),
    };
  }

  /** `ts=...;h1=...`, computed here; extra `h1`s (as during Paddle's secret rotation) can be listed first. */
  static sign(body: string, secret: string, at: Date = new Date(), extraH1: string[] = []): string {
    const ts = Math.floor(at.getTime() / 1000);
    const h1 = createHmac('sha256', secret).update(`${ts}:${body}`).digest('hex');
    return [`ts=${ts}`, ...extraH1.map((h) => `h1=${h}`), `h1=${h1}`].join(';');
  }

  private send(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://fake');
    this.requests.push({ method: req.method ?? 'GET', path: url.pathname, headers: req.headers, body });
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!auth || !this.validKeys.has(auth)) {
      return this.send(res, 403, { error: { type: 'request_error', code: 'forbidden', detail: "You aren't permitted" } });
    }
    if (req.method === 'GET' && url.pathname === '/event-types') {
      return this.send(res, 200, { data: [{ name: 'subscription.created' }], meta: { request_id: rid('req') } });
    }
    if (req.method === 'GET' && url.pathname === '/customers') {
      const email = url.searchParams.get('email');
      const data = [...this.customers]
        .filter(([, e]) => email === null || e === email)
        .map(([id, e]) => ({ id, email: e, status: 'active' }));
      return this.send(res, 200, {
        data,
        meta: { request_id: rid('req'), pagination: { per_page: 50, has_more: false, next: null, estimated_total: data.length } },
      });
    }
    if (req.method === 'POST' && url.pathname === '/customers') {
      const email = String(JSON.parse(body)?.email ?? '');
      const existing = [...this.customers].find(([, e]) => e === email);
      if (existing) {
        return this.send(res, 409, {
          error: {
            type: 'request_error',
            code: 'customer_already_exists',
            detail: `customer email conflicts with customer of id ${existing[0]}`,
          },
        });
      }
      const id = rid('ctm');
      this.customers.set(id, email);
      return this.send(res, 201, { data: { id, email, status: 'active' }, meta: { request_id: rid('req') } });
    }
    if (req.method === 'POST' && url.pathname === '/transactions') {
      const input = JSON.parse(body);
      const priceId = input?.items?.[0]?.price_id;
      if (!this.prices.has(priceId)) return this.send(res, 400, { error: { type: 'request_error', code: 'not_found', detail: 'price' } });
      if (input.customer_id !== undefined && !this.customers.has(input.customer_id)) {
        return this.send(res, 400, { error: { type: 'request_error', code: 'not_found', detail: 'customer' } });
      }
      const id = rid('txn');
      const txn = {
        id,
        status: 'ready',
        items: input.items,
        customer_id: input.customer_id ?? null,
        custom_data: input.custom_data ?? null,
        idempotencyKey: req.headers['idempotency-key'],
      };
      this.transactions.set(id, txn);
      return this.send(res, 201, {
        data: { id, status: 'ready', custom_data: txn.custom_data, checkout: { url: `https://pay.paddle.test/checkout?_ptxn=${id}` } },
      });
    }
    const subMatch = /^\/subscriptions\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && subMatch) {
      const sub = this.subscriptions.get(decodeURIComponent(subMatch[1]!));
      if (!sub) return this.send(res, 404, { error: { type: 'request_error', code: 'not_found', detail: 'subscription' } });
      return this.send(res, 200, { data: sub, meta: { request_id: rid('req') } });
    }
    if (req.method === 'GET' && url.pathname === '/subscriptions') {
      const all = [...this.subscriptions.values()];
      const after = url.searchParams.get('after');
      const perPage = Number(url.searchParams.get('per_page') ?? 50);
      const start = after ? all.findIndex((s) => s.id === after) + 1 : 0;
      const data = all.slice(start, start + perPage);
      return this.send(res, 200, {
        data,
        meta: {
          request_id: rid('req'),
          pagination: { per_page: perPage, has_more: start + perPage < all.length, next: null, estimated_total: all.length },
        },
      });
    }
    this.send(res, 404, { error: { type: 'request_error', code: 'not_found', detail: url.pathname } });
  }
}
