/**
 * A local fake of the Stripe API, stateful enough for what Nexus calls: the
 * account (credential check), Checkout Sessions, subscription reads and listing.
 * Tests drive it directly (complete a checkout, change a subscription) and build
 * signed events with the official package's `webhooks.generateTestHeaderString`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { closeServer, listenLocal } from '../support/local-server.js';
import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';

export interface FakeStripeSubscription {
  id: string;
  object: 'subscription';
  customer: string;
  status: string;
  metadata: Record<string, string>;
  cancel_at_period_end: boolean;
  canceled_at: number | null;
  ended_at: number | null;
  created: number;
  items: {
    object: 'list';
    data: {
      id: string;
      object: 'subscription_item';
      quantity: number;
      current_period_start: number;
      current_period_end: number;
      price: { id: string; object: 'price'; product: string };
    }[];
  };
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const rid = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;
const unix = (d: Date | string) => Math.floor(new Date(d).getTime() / 1000);

export class FakeStripe {
  readonly validKeys = new Set<string>();
  /** price id -> product id */
  readonly prices = new Map<string, string>();
  readonly sessions = new Map<string, Record<string, any>>();
  readonly subscriptions = new Map<string, FakeStripeSubscription>();
  readonly requests: RecordedRequest[] = [];
  /** Subscription reads answer 500 while this is > 0 (each read decrements it). */
  failReads = 0;
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

  /** What the customer's payment creates: the subscription a completed session starts. */
  completeCheckout(sessionId: string, period: { start: Date | string; end: Date | string }): FakeStripeSubscription {
    const session = this.sessions.get(sessionId);
    if (!session) throw new Error(`no session ${sessionId}`);
    const price = session['line_items[0][price]'] as string;
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(session)) {
      const m = /^subscription_data\[metadata\]\[(.+)\]$/.exec(k);
      if (m) metadata[m[1]!] = v as string;
    }
    const sub = this.createSubscription({ price, metadata, period });
    session.subscription = sub.id;
    session.status = 'complete';
    return sub;
  }

  createSubscription(input: {
    price: string;
    metadata: Record<string, string>;
    period: { start: Date | string; end: Date | string };
    status?: string;
    customer?: string;
  }): FakeStripeSubscription {
    const product = this.prices.get(input.price);
    if (!product) throw new Error(`fake stripe: unknown price ${input.price}`);
    const sub: FakeStripeSubscription = {
      id: rid('sub'),
      object: 'subscription',
      customer: input.customer ?? rid('cus'),
      status: input.status ?? 'active',
      metadata: input.metadata,
      cancel_at_period_end: false,
      canceled_at: null,
      ended_at: null,
      created: unix(input.period.start),
      items: {
        object: 'list',
        data: [
          {
            id: rid('si'),
            object: 'subscription_item',
            quantity: 1,
            current_period_start: unix(input.period.start),
            current_period_end: unix(input.period.end),
            price: { id: input.price, object: 'price', product },
          },
        ],
      },
    };
    this.subscriptions.set(sub.id, sub);
    return sub;
  }

  /** Changes a subscription as Stripe would; returns a deep copy (an event's payload). */
  update(
    id: string,
    change: {
      status?: string;
      price?: string;
      period?: { start: Date | string; end: Date | string };
      cancelAtPeriodEnd?: boolean;
      canceledAt?: Date | string | null;
      endedAt?: Date | string | null;
    },
  ): FakeStripeSubscription {
    const sub = this.subscriptions.get(id);
    if (!sub) throw new Error(`no subscription ${id}`);
    const item = sub.items.data[0]!;
    if (change.status) sub.status = change.status;
    if (change.price) item.price = { id: change.price, object: 'price', product: this.prices.get(change.price)! };
    if (change.period) {
      item.current_period_start = unix(change.period.start);
      item.current_period_end = unix(change.period.end);
    }
    if (change.cancelAtPeriodEnd !== undefined) sub.cancel_at_period_end = change.cancelAtPeriodEnd;
    if (change.canceledAt !== undefined) sub.canceled_at = change.canceledAt === null ? null : unix(change.canceledAt);
    if (change.endedAt !== undefined) sub.ended_at = change.endedAt === null ? null : unix(change.endedAt);
    return this.snapshot(id);
  }

  snapshot(id: string): FakeStripeSubscription {
    return JSON.parse(JSON.stringify(this.subscriptions.get(id)));
  }

  /** An event as Stripe sends it. */
  event(type: string, object: unknown, created: Date | string): { id: string; body: string } {
    const id = rid('evt');
    const body = JSON.stringify({
      id,
      object: 'event',
      api_version: '2026-02-25.clover',
      created: unix(created),
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
      data: { object },
    });
    return { id, body };
  }

  /** The Stripe-Signature header for a body, made by the official package. */
  static sign(body: string, secret: string, at: Date = new Date()): string {
    return Stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: unix(at) });
  }

  private send(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': rid('req') });
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
      return this.send(res, 401, { error: { type: 'invalid_request_error', message: 'Invalid API Key provided' } });
    }
    if (req.method === 'GET' && url.pathname === '/v1/account') {
      return this.send(res, 200, { id: 'acct_fake123', object: 'account', country: 'US' });
    }
    if (req.method === 'POST' && url.pathname === '/v1/checkout/sessions') {
      const key = req.headers['idempotency-key'];
      if (typeof key === 'string') {
        const existing = [...this.sessions.values()].find((s) => s.idempotencyKey === key);
        if (existing) return this.send(res, 200, this.sessionObject(existing));
      }
      const params = Object.fromEntries(new URLSearchParams(body));
      if (!this.prices.has(params['line_items[0][price]'] ?? '')) {
        return this.send(res, 400, { error: { type: 'invalid_request_error', message: 'No such price' } });
      }
      const session: Record<string, any> = { ...params, id: rid('cs_test'), idempotencyKey: key, status: 'open' };
      this.sessions.set(session.id, session);
      return this.send(res, 200, this.sessionObject(session));
    }
    const subMatch = /^\/v1\/subscriptions\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && subMatch) {
      if (this.failReads > 0) {
        this.failReads--;
        return this.send(res, 500, { error: { type: 'api_error', message: 'fake outage' } });
      }
      const sub = this.subscriptions.get(decodeURIComponent(subMatch[1]!));
      if (!sub)
        return this.send(res, 404, { error: { type: 'invalid_request_error', code: 'resource_missing', message: 'No such subscription' } });
      return this.send(res, 200, sub);
    }
    if (req.method === 'GET' && url.pathname === '/v1/subscriptions') {
      const all = [...this.subscriptions.values()].reverse();
      const after = url.searchParams.get('starting_after');
      const limit = Number(url.searchParams.get('limit') ?? 10);
      const start = after ? all.findIndex((s) => s.id === after) + 1 : 0;
      const data = all.slice(start, start + limit);
      return this.send(res, 200, { object: 'list', url: '/v1/subscriptions', has_more: start + limit < all.length, data });
    }
    this.send(res, 404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method} ${url.pathname})` } });
  }

  private sessionObject(s: Record<string, any>) {
    return {
      id: s.id,
      object: 'checkout.session',
      mode: s.mode,
      status: s.status,
      client_reference_id: s.client_reference_id ?? null,
      success_url: s.success_url ?? null,
      subscription: s.subscription ?? null,
      url: `https://checkout.stripe.test/c/pay/${s.id}`,
    };
  }
}
