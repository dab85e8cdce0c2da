/** The pure rules: provider objects -> neutral states, and projection -> access status at a fixed time. */
import { describe, expect, it } from 'vitest';
import type { ExternalSubscriptionRow } from '../../src/domain/billing/billing-repo.js';
import { paddleSubscriptionState } from '../../src/domain/billing/paddle-client.js';
import { desiredAccessStatus, periodKeyOf } from '../../src/domain/billing/projection-rules.js';
import { stripeSubscriptionState } from '../../src/domain/billing/stripe-client.js';

const NOW = new Date('2026-11-15T00:00:00Z');
const HOUR = 3600_000;
const GRACE = 72 * HOUR;

function projection(over: Partial<ExternalSubscriptionRow>): ExternalSubscriptionRow {
  return {
    id: 'p',
    workspace_id: 'w',
    billing_connection_id: 'c',
    workspace_access_id: 'a',
    provider: 'STRIPE',
    external_subscription_id: 'sub_1',
    external_customer_id: null,
    status: 'active',
    plan_id: null,
    external_product_id: null,
    external_price_id: null,
    current_period_start: new Date('2026-11-01T00:00:00Z'),
    current_period_end: new Date('2026-12-01T00:00:00Z'),
    cancel_at_period_end: false,
    canceled_at: null,
    ended_at: null,
    past_due_since: null,
    source_updated_at: new Date('2026-11-01T00:00:00Z'),
    source_tiebreak: '',
    created_at: NOW,
    updated_at: NOW,
    ...over,
  };
}

describe('desiredAccessStatus', () => {
  it.each([
    ['active', {}, 'ACTIVE'],
    ['trialing', { status: 'trialing' }, 'ACTIVE'],
    ['active, set to cancel, period running', { cancel_at_period_end: true }, 'ACTIVE'],
    ['active, set to cancel, period ended', { cancel_at_period_end: true, current_period_end: new Date(NOW.getTime() - 1) }, 'EXPIRED'],
    ['past_due inside the grace', { status: 'past_due', past_due_since: new Date(NOW.getTime() - GRACE + HOUR) }, 'ACTIVE'],
    ['past_due at the end of the grace', { status: 'past_due', past_due_since: new Date(NOW.getTime() - GRACE) }, 'SUSPENDED'],
    ['unpaid', { status: 'unpaid' }, 'SUSPENDED'],
    ['paused', { status: 'paused' }, 'SUSPENDED'],
    ['canceled and ended', { status: 'canceled', ended_at: new Date(NOW.getTime() - HOUR) }, 'EXPIRED'],
    ['canceled, ending later', { status: 'canceled', ended_at: new Date(NOW.getTime() + HOUR) }, 'ACTIVE'],
    ['incomplete', { status: 'incomplete' }, null],
    ['incomplete_expired', { status: 'incomplete_expired' }, null],
  ] as const)('%s -> %s', (_label, over, expected) => {
    expect(desiredAccessStatus(projection(over as Partial<ExternalSubscriptionRow>), NOW, GRACE)).toBe(expected);
  });
});

describe('provider objects', () => {
  it("reads Stripe's current period from the subscription item", () => {
    const state = stripeSubscriptionState(
      {
        id: 'sub_1',
        status: 'active',
        customer: 'cus_1',
        metadata: { nexus_workspace_access_id: 'acc' },
        cancel_at_period_end: true,
        canceled_at: null,
        ended_at: null,
        items: {
          data: [
            { current_period_start: 1_790_000_000, current_period_end: 1_792_592_000, price: { id: 'price_1', product: { id: 'prod_1' } } },
          ],
        },
      },
      NOW,
      'evt_1',
    );
    expect(state).toEqual({
      externalSubscriptionId: 'sub_1',
      externalCustomerId: 'cus_1',
      status: 'active',
      accessId: 'acc',
      externalProductId: 'prod_1',
      externalPriceId: 'price_1',
      currentPeriodStart: new Date(1_790_000_000_000),
      currentPeriodEnd: new Date(1_792_592_000_000),
      cancelAtPeriodEnd: true,
      canceledAt: null,
      endedAt: null,
      sourceUpdatedAt: NOW,
      sourceTiebreak: 'evt_1',
    });
    expect(stripeSubscriptionState({ id: 's', status: 'something_new', items: { data: [] } }, NOW, '').status).toBe('incomplete');
  });

  it('reads a Paddle subscription: billing period, scheduled cancel, updated_at as the source time', () => {
    const state = paddleSubscriptionState({
      id: 'sub_01',
      status: 'active',
      customer_id: 'ctm_01',
      custom_data: { nexus_workspace_access_id: 'acc' },
      items: [{ price: { id: 'pri_01', product_id: 'pro_01' } }],
      current_billing_period: { starts_at: '2026-11-01T00:00:00Z', ends_at: '2026-12-01T00:00:00Z' },
      scheduled_change: { action: 'cancel', effective_at: '2026-12-01T00:00:00Z' },
      canceled_at: null,
      updated_at: '2026-11-10T10:00:00.123Z',
    });
    expect(state).toMatchObject({
      status: 'active',
      accessId: 'acc',
      externalPriceId: 'pri_01',
      externalProductId: 'pro_01',
      cancelAtPeriodEnd: true,
      currentPeriodEnd: new Date('2026-12-01T00:00:00Z'),
      sourceUpdatedAt: new Date('2026-11-10T10:00:00.123Z'),
      endedAt: null,
    });
    const canceled = paddleSubscriptionState({
      id: 's',
      status: 'canceled',
      canceled_at: '2026-11-12T00:00:00Z',
      updated_at: '2026-11-12T00:00:00Z',
      items: [],
    });
    expect(canceled.endedAt).toEqual(new Date('2026-11-12T00:00:00Z'));
  });

  it('keys a billing period by provider, subscription and start', () => {
    expect(periodKeyOf('STRIPE', 'sub_1', new Date('2026-11-01T00:00:00Z'))).toBe('stripe:sub_1:2026-11-01T00:00:00.000Z');
  });
});
