/**
 * The billing tests' world: a Nexus on a fixed, movable clock, local fake Stripe
 * and Paddle servers, and helpers that set up workspaces, plans, accesses and
 * connections through the Admin API (the generated client).
 */
import { expect } from 'vitest';
import {
  bindPlanStrategy,
  configureBillingWebhookSecret,
  createBillingConnection,
  createBillingProductMapping,
  createPlan,
  createQuotaStrategy,
  createWorkspace,
  getWorkspaceAccess,
  listExternalSubscriptions,
  provisionWorkspaceUser,
  publishPlan,
  publishPlanStrategy,
} from '../support/sdk.js';
import type { BillingConnectionDto, CreateBillingConnectionDto, Int64String } from '../../generated/client/types.gen.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { FakePaddle } from './fake-paddle.js';
import { FakeStripe } from './fake-stripe.js';

export const T0 = new Date('2026-11-01T00:00:00Z');
export const HOUR = 3600_000;
export const DAY = 24 * HOUR;
export const GRACE_HOURS = 72;

class TestClock {
  constructor(public current: Date) {}
  now(): Date {
    return new Date(this.current);
  }
  set(d: Date | string): void {
    this.current = new Date(d);
  }
  advance(ms: number): Date {
    this.current = new Date(this.current.getTime() + ms);
    return this.now();
  }
}

export const at = (base: Date, ms: number) => new Date(base.getTime() + ms);

let counter = 0;
/** Unique, marked (for the run-wide secret scan) credentials and secrets. */
export function stripeKey(): string {
  return `sk_test_${SECRET_MARKER}-stripe-${++counter}-${Date.now()}`;
}
function paddleKey(): string {
  return `pdl_sdbx_apikey_${SECRET_MARKER}-paddle-${++counter}-${Date.now()}`;
}
export function webhookSecret(): string {
  return `whsec_${SECRET_MARKER}-${++counter}-${Date.now()}`;
}

export interface BillingWorld {
  t: TestApp;
  clock: TestClock;
  stripe: FakeStripe;
  paddle: FakePaddle;
  close(): Promise<void>;
}

/** `env`: more settings for its Nexus. */
export async function startBillingWorld(env: Record<string, string> = {}): Promise<BillingWorld> {
  const stripe = await new FakeStripe().start();
  const paddle = await new FakePaddle().start();
  const clock = new TestClock(T0);
  const t = await startTestApp({
    clock,
    env: {
      NEXUS_STRIPE_API_BASE_URL: stripe.url,
      NEXUS_PADDLE_API_BASE_URL: paddle.url,
      NEXUS_BILLING_PAST_DUE_GRACE_HOURS: String(GRACE_HOURS),
      NEXUS_WEBHOOK_SECRET_OVERLAP_HOURS: '24',
      ...env,
    },
  });
  return {
    t,
    clock,
    stripe,
    paddle,
    async close() {
      await t.close();
      await stripe.close();
      await paddle.close();
    },
  };
}

export async function newWorkspace(w: BillingWorld, name = 'billing'): Promise<string> {
  const res = await createWorkspace({ client: w.t.client, body: { name } });
  expect(res.response.status).toBe(201);
  return res.data!.id;
}

/** A published plan with a published monthly quota strategy in force since 2020. */
export async function newPlan(w: BillingWorld, workspaceId: string, key: string, quotaUnits: Int64String = '1000'): Promise<string> {
  const strategy = await createQuotaStrategy({
    client: w.t.client,
    path: { workspaceId },
    body: {
      key: `${key}-q`,
      resetInterval: 'MONTH',
      quotaUnits,
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '1000000',
      cachedInputMultiplierPpm: '100000',
      maxOutputTokens: 1024,
    },
  });
  expect(strategy.response.status).toBe(201);
  await publishPlanStrategy({ client: w.t.client, path: { strategyId: strategy.data!.id } });
  const plan = await createPlan({
    client: w.t.client,
    path: { workspaceId },
    body: { key, name: key.toUpperCase(), billingInterval: 'MONTH' },
  });
  expect(plan.response.status).toBe(201);
  await bindPlanStrategy({
    client: w.t.client,
    path: { planId: plan.data!.id },
    body: { strategyId: strategy.data!.id, effectiveFrom: '2020-01-01T00:00:00Z' },
  });
  const published = await publishPlan({ client: w.t.client, path: { planId: plan.data!.id } });
  expect(published.response.status).toBe(200);
  return plan.data!.id;
}

export async function provision(w: BillingWorld, workspaceId: string, planId: string, user = `u-${++counter}`): Promise<string> {
  const res = await provisionWorkspaceUser({
    client: w.t.client,
    path: { workspaceId },
    body: { externalUserId: user, email: `${user}@example.com`, planId },
  });
  expect(res.response.status).toBe(201);
  return res.data!.access.id;
}

export async function accessOf(w: BillingWorld, accessId: string) {
  const res = await getWorkspaceAccess({ client: w.t.client, path: { accessId } });
  expect(res.response.status).toBe(200);
  return res.data!;
}

export async function projectionsOf(w: BillingWorld, accessId: string) {
  const res = await listExternalSubscriptions({ client: w.t.client, path: { accessId } });
  expect(res.response.status).toBe(200);
  return res.data!;
}

export interface Conn {
  dto: BillingConnectionDto;
  credential: string | null;
  secret: string;
}

/** A connection with a webhook secret, and (unless told otherwise) a credential the fake accepts. */
export async function newConnection(
  w: BillingWorld,
  workspaceId: string,
  opts: { provider?: 'STRIPE' | 'PADDLE'; kind?: 'HOSTED' | 'APP_SYNC'; credential?: boolean } = {},
): Promise<Conn> {
  const provider = opts.provider ?? 'STRIPE';
  const credential = opts.credential === false ? null : provider === 'STRIPE' ? stripeKey() : paddleKey();
  const secret = provider === 'STRIPE' ? webhookSecret() : `pdl_ntfset_${SECRET_MARKER}-${++counter}`;
  if (credential) (provider === 'STRIPE' ? w.stripe : w.paddle).validKeys.add(credential);
  const body: CreateBillingConnectionDto = {
    name: `${provider} ${opts.kind ?? 'HOSTED'}`,
    provider,
    kind: opts.kind ?? 'HOSTED',
    mode: 'TEST',
    ...(credential ? { credential } : {}),
  };
  const created = await createBillingConnection({ client: w.t.client, path: { workspaceId }, body });
  expect(created.response.status).toBe(201);
  const configured = await configureBillingWebhookSecret({
    client: w.t.client,
    path: { connectionId: created.data!.id },
    body: { webhookSecret: secret },
  });
  expect(configured.response.status).toBe(200);
  return { dto: configured.data!, credential, secret };
}

/** A workspace with a free plan (100 units), a pro plan (1000) and a Stripe connection mapping price_pro to pro. */
export async function freeAndProWorkspace(w: BillingWorld, name?: string) {
  const workspaceId = await newWorkspace(w, name);
  const freePlan = await newPlan(w, workspaceId, 'free', '100');
  const proPlan = await newPlan(w, workspaceId, 'pro', '1000');
  const conn = await newConnection(w, workspaceId);
  w.stripe.prices.set('price_pro', 'prod_pro');
  await newMapping(w, conn.dto.id, proPlan, 'prod_pro', 'price_pro');
  return { workspaceId, freePlan, proPlan, conn };
}

export async function newMapping(
  w: BillingWorld,
  connectionId: string,
  planId: string,
  product: string,
  price?: string,
  checkoutEnabled = true,
) {
  const res = await createBillingProductMapping({
    client: w.t.client,
    path: { connectionId },
    body: {
      externalProductId: product,
      ...(price ? { externalPriceId: price } : {}),
      planId,
      checkoutEnabled: Boolean(price) && checkoutEnabled,
    },
  });
  expect(res.response.status).toBe(201);
  return res.data!.id;
}

/** Posts a body to the connection's webhookUrl, as the provider would. */
export async function deliver(w: BillingWorld, conn: Conn, body: string, signature: string | null) {
  const headerName = conn.dto.provider === 'STRIPE' ? 'stripe-signature' : 'paddle-signature';
  const res = await w.t.fetch(conn.dto.webhookUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'user-agent': 'Stripe/1.0', ...(signature ? { [headerName]: signature } : {}) },
    body,
  });
  return { status: res.status, body: await res.json() };
}

/** Signs and delivers a Stripe event at the clock's now, then processes what is pending. */
export async function deliverStripe(w: BillingWorld, conn: Conn, event: { body: string }, opts: { process?: boolean } = {}) {
  const res = await deliver(w, conn, event.body, FakeStripe.sign(event.body, conn.secret, w.clock.now()));
  expect(res.status).toBe(200);
  if (opts.process !== false) await w.t.hooks.billingPasses.processPending();
  return res;
}

export async function deliverPaddle(w: BillingWorld, conn: Conn, event: { body: string }) {
  const res = await deliver(w, conn, event.body, FakePaddle.sign(event.body, conn.secret, w.clock.now()));
  expect(res.status).toBe(200);
  await w.t.hooks.billingPasses.processPending();
  return res;
}

export async function billingPeriods(w: BillingWorld, accessId: string) {
  return w.t.database.db('quota_periods').where({ workspace_access_id: accessId, source: 'billing' }).orderBy('period_start');
}

export async function grantRows(w: BillingWorld, accessId: string) {
  return w.t.database.db('billing_period_grants').where({ workspace_access_id: accessId }).orderBy('period_start');
}
