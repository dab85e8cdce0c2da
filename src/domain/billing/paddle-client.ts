/**
 * Paddle Billing through a small client of its REST API (Bearer API key, JSON
 * envelopes `{ data, meta }`). A small client rather than @paddle/paddle-node-sdk
 * because the SDK cannot be pointed at an arbitrary base URL, and tests need a
 * local fake (NEXUS_PADDLE_API_BASE_URL).
 */
import { bindDeps } from '../bind.js';
import {
  ACCESS_ID_METADATA_KEY,
  ProviderError,
  type BillingMode,
  type BillingProviderClient,
  type SubscriptionState,
  type SubscriptionStatus,
} from './billing-types.js';

const PADDLE_BASE = { LIVE: 'https://api.paddle.com', TEST: 'https://sandbox-api.paddle.com' } as const;

const date = (v: unknown): Date | null => (typeof v === 'string' && v ? new Date(v) : null);

function paddleStatus(value: string): SubscriptionStatus {
  switch (value) {
    case 'active':
    case 'trialing':
    case 'past_due':
    case 'paused':
    case 'canceled':
      return value;
    default:
      return 'incomplete';
  }
}

/** A Paddle subscription entity (API or event `data`) -> the neutral state; `updated_at` orders states. */
export function paddleSubscriptionState(sub: any, sourceTiebreak = ''): SubscriptionState {
  const item = sub?.items?.[0];
  const price = item?.price;
  const scheduled = sub?.scheduled_change;
  const status = paddleStatus(String(sub.status));
  return {
    externalSubscriptionId: String(sub.id),
    externalCustomerId: typeof sub.customer_id === 'string' ? sub.customer_id : null,
    status,
    accessId: typeof sub?.custom_data?.[ACCESS_ID_METADATA_KEY] === 'string' ? sub.custom_data[ACCESS_ID_METADATA_KEY] : null,
    externalProductId: price?.product_id ?? null,
    externalPriceId: price?.id ?? null,
    currentPeriodStart: date(sub?.current_billing_period?.starts_at),
    currentPeriodEnd: date(sub?.current_billing_period?.ends_at),
    cancelAtPeriodEnd: scheduled?.action === 'cancel',
    canceledAt: date(sub.canceled_at),
    endedAt: status === 'canceled' ? (date(sub.canceled_at) ?? date(sub.updated_at)) : null,
    sourceUpdatedAt: date(sub.updated_at) ?? new Date(0),
    sourceTiebreak,
  };
}

/** Where and how the client reaches Paddle's API. */
interface PaddleApi {
  base: string;
  apiKey: string;
  fetch: typeof fetch;
}

type CheckoutRequest = Parameters<BillingProviderClient['createCheckout']>[0];

async function request(api: PaddleApi, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  let res: Response;
  try {
    res = await api.fetch(`${api.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${api.apiKey}`,
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(15_000),
    });
  } catch {
    throw new ProviderError('unavailable', 'Paddle could not be reached');
  }
  const text = await res.text();
  if (res.status === 401 || res.status === 403) throw new ProviderError('auth', 'Paddle refused the credential', res.status);
  if (res.status === 404) throw new ProviderError('not_found', 'Paddle does not know this object', 404);
  if (res.status >= 500) throw new ProviderError('unavailable', `Paddle answered ${res.status}`, res.status);
  let json: any;
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    throw new ProviderError('unavailable', 'Paddle answered with something that is not JSON', res.status);
  }
  if (res.status >= 400) {
    const detail = String(json?.error?.detail ?? json?.error?.code ?? '').slice(0, 200);
    throw new ProviderError('rejected', `Paddle refused the request: ${detail}`, res.status);
  }
  return json;
}

async function findCustomer(api: PaddleApi, email: string): Promise<string | null> {
  const json = await request(api, 'GET', `/customers?${new URLSearchParams({ email })}`);
  const id = Array.isArray(json?.data) ? json.data[0]?.id : undefined;
  return typeof id === 'string' ? id : null;
}

/**
 * Paddle's customer with this exact email, created when there is none. A
 * transaction names its customer by id; Paddle refuses a second customer
 * with the same email (409), so a create that lost a race reads it again.
 */
async function customerWithEmail(api: PaddleApi, email: string): Promise<string> {
  const known = await findCustomer(api, email);
  if (known) return known;
  try {
    const json = await request(api, 'POST', '/customers', { email });
    if (typeof json?.data?.id === 'string') return json.data.id;
    throw new ProviderError('rejected', 'Paddle returned a customer without an id');
  } catch (err) {
    if (!(err instanceof ProviderError && err.httpStatus === 409)) throw err;
    const raced = await findCustomer(api, email);
    if (raced) return raced;
    throw err;
  }
}

async function verify(api: PaddleApi): Promise<{ externalAccountId: string | null }> {
  await request(api, 'GET', '/event-types');
  return { externalAccountId: null };
}

async function createCheckout(api: PaddleApi, input: CheckoutRequest): Promise<{ id: string; url: string }> {
  const customerId = input.customerEmail ? await customerWithEmail(api, input.customerEmail) : null;
  const json = await request(
    api,
    'POST',
    '/transactions',
    {
      items: [{ price_id: input.priceId, quantity: 1 }],
      collection_mode: 'automatic',
      custom_data: { [ACCESS_ID_METADATA_KEY]: input.accessId },
      // The checkout opens with this customer, so its email is filled in.
      ...(customerId ? { customer_id: customerId } : {}),
    },
    input.idempotencyKey ? { 'idempotency-key': input.idempotencyKey } : {},
  );
  const id = json?.data?.id;
  const url = json?.data?.checkout?.url;
  if (typeof id !== 'string' || typeof url !== 'string') {
    throw new ProviderError('rejected', 'Paddle returned a transaction without a checkout URL (is a default payment link set?)');
  }
  return { id, url };
}

async function getSubscription(api: PaddleApi, id: string): Promise<SubscriptionState | null> {
  try {
    const json = await request(api, 'GET', `/subscriptions/${encodeURIComponent(id)}`);
    return paddleSubscriptionState(json.data);
  } catch (err) {
    if (err instanceof ProviderError && err.kind === 'not_found') return null;
    throw err;
  }
}

async function* listSubscriptions(api: PaddleApi): AsyncGenerator<SubscriptionState> {
  let after: string | null = null;
  for (;;) {
    const query = new URLSearchParams({ per_page: '50' });
    if (after) query.set('after', after);
    const json = await request(api, 'GET', `/subscriptions?${query}`);
    const items: any[] = Array.isArray(json?.data) ? json.data : [];
    for (const sub of items) yield paddleSubscriptionState(sub);
    if (!json?.meta?.pagination?.has_more || items.length === 0) return;
    after = String(items[items.length - 1].id);
  }
}

export function createPaddleClient(opts: {
  apiKey: string;
  baseUrl: string | undefined;
  mode: BillingMode;
  fetch: typeof fetch;
}): BillingProviderClient {
  const api: PaddleApi = { base: (opts.baseUrl ?? PADDLE_BASE[opts.mode]).replace(/\/+$/, ''), apiKey: opts.apiKey, fetch: opts.fetch };
  return bindDeps(api, { verify, createCheckout, getSubscription, listSubscriptions });
}
