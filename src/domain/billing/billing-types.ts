/** What the billing area passes around, provider-neutral. */

export type BillingProvider = 'STRIPE' | 'PADDLE';
export type BillingKind = 'HOSTED' | 'APP_SYNC';
export type BillingMode = 'TEST' | 'LIVE';

export const SUBSCRIPTION_STATUSES = [
  'incomplete',
  'incomplete_expired',
  'trialing',
  'active',
  'past_due',
  'unpaid',
  'paused',
  'canceled',
] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/** One subscription's state as a provider (or an app-sync report) states it. */
export interface SubscriptionState {
  externalSubscriptionId: string;
  externalCustomerId: string | null;
  status: SubscriptionStatus;
  /** The Nexus access the subscription was bought for (checkout metadata / custom_data). */
  accessId: string | null;
  externalProductId: string | null;
  externalPriceId: string | null;
  currentPeriodStart: Date | null;
  currentPeriodEnd: Date | null;
  cancelAtPeriodEnd: boolean;
  canceledAt: Date | null;
  endedAt: Date | null;
  /** When this state was current at the provider; an older state never overwrites a newer one. */
  sourceUpdatedAt: Date;
  /** Orders two states with the same source time, the same way whatever order they arrive in. */
  sourceTiebreak: string;
}

export const ACCESS_ID_METADATA_KEY = 'nexus_workspace_access_id';

/** Statuses whose current period the provider has opened: its quota is granted. */
export const GRANTING_STATUSES: ReadonlySet<SubscriptionStatus> = new Set(['active', 'trialing', 'past_due']);

export class ProviderError extends Error {
  constructor(
    readonly kind: 'auth' | 'not_found' | 'rejected' | 'unavailable',
    message: string,
    readonly httpStatus?: number,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

interface CheckoutRequest {
  accessId: string;
  priceId: string;
  successUrl?: string | undefined;
  cancelUrl?: string | undefined;
  customerEmail?: string | undefined;
  idempotencyKey?: string | undefined;
}

/** What Nexus needs from a billing provider's API. */
export interface BillingProviderClient {
  verify(): Promise<{ externalAccountId: string | null }>;
  createCheckout(input: CheckoutRequest): Promise<{ id: string; url: string }>;
  /** The subscription as it is now; null when the provider does not know it. */
  getSubscription(id: string): Promise<SubscriptionState | null>;
  listSubscriptions(): AsyncIterable<SubscriptionState>;
}
