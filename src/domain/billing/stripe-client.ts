/**
 * Stripe through the official `stripe` package. The base URL is configurable
 * (NEXUS_STRIPE_API_BASE_URL) so tests run against a local fake; requests go
 * through the injected fetch. Since API version 2025-03-31 a subscription's
 * current period lives on its items, not on the subscription. The package is loaded by a client's first
 * request, not with the process: most processes never call Stripe.
 */
import type Stripe from 'stripe';
import { bindDeps } from '../bind.js';
import {
  ACCESS_ID_METADATA_KEY,
  ProviderError,
  SUBSCRIPTION_STATUSES,
  type BillingProviderClient,
  type SubscriptionState,
  type SubscriptionStatus,
} from './billing-types.js';

const fromUnix = (s: number | null | undefined): Date | null => (typeof s === 'number' ? new Date(s * 1000) : null);

function stripeStatus(value: string): SubscriptionStatus {
  return (SUBSCRIPTION_STATUSES as readonly string[]).includes(value) ? (value as SubscriptionStatus) : 'incomplete';
}

/** A Stripe subscription object (from the API or an event payload) -> the neutral state. */
export function stripeSubscriptionState(sub: any, sourceUpdatedAt: Date, sourceTiebreak: string): SubscriptionState {
  const item = sub?.items?.data?.[0];
  const price = item?.price ?? item?.plan;
  const product = price?.product;
  const customer = sub?.customer;
  return {
    externalSubscriptionId: String(sub.id),
    externalCustomerId: typeof customer === 'string' ? customer : (customer?.id ?? null),
    status: stripeStatus(String(sub.status)),
    accessId: typeof sub?.metadata?.[ACCESS_ID_METADATA_KEY] === 'string' ? sub.metadata[ACCESS_ID_METADATA_KEY] : null,
    externalProductId: typeof product === 'string' ? product : (product?.id ?? null),
    externalPriceId: price?.id ?? null,
    currentPeriodStart: fromUnix(item?.current_period_start ?? sub?.current_period_start),
    currentPeriodEnd: fromUnix(item?.current_period_end ?? sub?.current_period_end),
    cancelAtPeriodEnd: Boolean(sub.cancel_at_period_end),
    canceledAt: fromUnix(sub.canceled_at),
    endedAt: fromUnix(sub.ended_at),
    sourceUpdatedAt,
    sourceTiebreak,
  };
}

function toProviderError(err: unknown): ProviderError {
  const e = err as { type?: string; statusCode?: number; message?: string };
  if (e?.type === 'StripeAuthenticationError' || e?.type === 'StripePermissionError') {
    return new ProviderError('auth', 'Stripe refused the credential', e.statusCode);
  }
  if (e?.statusCode === 404) return new ProviderError('not_found', 'Stripe does not know this object', 404);
  if (e?.type === 'StripeConnectionError' || (e?.statusCode ?? 0) >= 500 || !e?.statusCode) {
    return new ProviderError('unavailable', 'Stripe could not be reached', e?.statusCode);
  }
  return new ProviderError('rejected', `Stripe refused the request: ${String(e.message ?? '').slice(0, 200)}`, e.statusCode);
}

/** The Stripe package's client (made on first use), and the clock a state read from it is dated by. */
interface StripeApi {
  stripe: () => Promise<Stripe>;
  now: () => Date;
}

type CheckoutRequest = Parameters<BillingProviderClient['createCheckout']>[0];

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toProviderError(err);
  }
}

async function verify(api: StripeApi): Promise<{ externalAccountId: string | null }> {
  const stripe = await api.stripe();
  const account = await call(() => stripe.accounts.retrieveCurrent());
  return { externalAccountId: account.id ?? null };
}

async function createCheckout(api: StripeApi, input: CheckoutRequest): Promise<{ id: string; url: string }> {
  const stripe = await api.stripe();
  const session = await call(() =>
    stripe.checkout.sessions.create(
      {
        mode: 'subscription',
        line_items: [{ price: input.priceId, quantity: 1 }],
        client_reference_id: input.accessId,
        metadata: { [ACCESS_ID_METADATA_KEY]: input.accessId },
        subscription_data: { metadata: { [ACCESS_ID_METADATA_KEY]: input.accessId } },
        ...(input.successUrl ? { success_url: input.successUrl } : {}),
        ...(input.cancelUrl ? { cancel_url: input.cancelUrl } : {}),
        ...(input.customerEmail ? { customer_email: input.customerEmail } : {}),
      },
      input.idempotencyKey ? { idempotencyKey: input.idempotencyKey } : undefined,
    ),
  );
  if (!session.url) throw new ProviderError('rejected', 'Stripe returned a checkout session without a URL');
  return { id: session.id, url: session.url };
}

async function getSubscription({ stripe: client, now }: StripeApi, id: string): Promise<SubscriptionState | null> {
  const stripe = await client();
  const readAt = now();
  try {
    const sub = await stripe.subscriptions.retrieve(id);
    return stripeSubscriptionState(sub, readAt, '');
  } catch (err) {
    const e = toProviderError(err);
    if (e.kind === 'not_found') return null;
    throw e;
  }
}

async function* listSubscriptions({ stripe: client, now }: StripeApi): AsyncGenerator<SubscriptionState> {
  const stripe = await client();
  const readAt = now();
  try {
    for await (const sub of stripe.subscriptions.list({ status: 'all', limit: 100 })) {
      yield stripeSubscriptionState(sub, readAt, '');
    }
  } catch (err) {
    throw err instanceof ProviderError ? err : toProviderError(err);
  }
}

/** The package's client options: the injected fetch, no retries of its own, and the configured base URL. */
function stripeConfig(StripeClass: typeof Stripe, baseUrl: string | undefined, fetchFn: typeof fetch): Stripe.StripeConfig {
  const config: Stripe.StripeConfig = {
    httpClient: StripeClass.createFetchHttpClient(fetchFn),
    maxNetworkRetries: 0,
    timeout: 15_000,
    telemetry: false,
  };
  if (baseUrl) {
    const url = new URL(baseUrl);
    config.host = url.hostname;
    config.port = url.port || (url.protocol === 'https:' ? 443 : 80);
    config.protocol = url.protocol === 'https:' ? 'https' : 'http';
  }
  return config;
}

export function createStripeClient(opts: {
  apiKey: string;
  baseUrl: string | undefined;
  fetch: typeof fetch;
  now: () => Date;
}): BillingProviderClient {
  let client: Promise<Stripe> | undefined;
  const stripe = () =>
    (client ??= import('stripe').then(
      ({ default: StripeClass }) => new StripeClass(opts.apiKey, stripeConfig(StripeClass, opts.baseUrl, opts.fetch)),
    ));
  return bindDeps({ stripe, now: opts.now }, { verify, createCheckout, getSubscription, listSubscriptions });
}
