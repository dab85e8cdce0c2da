/**
 * What a provider's webhook body says: its envelope (event id, type, time) and the subscription it
 * is about. Stripe and Paddle name these differently; the inbox reads them here.
 */
import { ACCESS_ID_METADATA_KEY, type BillingProvider, type SubscriptionState } from './billing-types.js';
import { paddleSubscriptionState } from './paddle-client.js';
import { stripeSubscriptionState } from './stripe-client.js';

interface Envelope {
  eventId: string;
  type: string;
  createdAt: Date | null;
}

/** What an event says about a subscription. */
interface Signal {
  subscriptionId: string;
  /** The subscription as the payload carries it (subscription events only). */
  payloadState: SubscriptionState | null;
  accessIdHint: string | null;
}

export function envelopeOf(provider: BillingProvider, body: any): Envelope | null {
  if (!body || typeof body !== 'object') return null;
  if (provider === 'STRIPE') {
    if (typeof body.id !== 'string' || typeof body.type !== 'string') return null;
    return { eventId: body.id, type: body.type, createdAt: typeof body.created === 'number' ? new Date(body.created * 1000) : null };
  }
  if (typeof body.event_id !== 'string' || typeof body.event_type !== 'string') return null;
  const occurred = typeof body.occurred_at === 'string' ? new Date(body.occurred_at) : null;
  return { eventId: body.event_id, type: body.event_type, createdAt: occurred && !isNaN(occurred.getTime()) ? occurred : null };
}

const idOf = (v: unknown): string | null => (typeof v === 'string' ? v : typeof (v as any)?.id === 'string' ? (v as any).id : null);

function stripeSignal(body: any): Signal | null {
  const type: string = body.type;
  const obj = body?.data?.object;
  if (!obj) return null;
  if (type.startsWith('customer.subscription.')) {
    return {
      subscriptionId: String(obj.id),
      payloadState: stripeSubscriptionState(obj, new Date(Number(body.created) * 1000), String(body.id)),
      accessIdHint: null,
    };
  }
  if (type === 'checkout.session.completed' || type === 'checkout.session.async_payment_succeeded') {
    const sub = idOf(obj.subscription);
    if (obj.mode !== 'subscription' || !sub) return null;
    return {
      subscriptionId: sub,
      payloadState: null,
      accessIdHint: typeof obj.client_reference_id === 'string' ? obj.client_reference_id : null,
    };
  }
  if (type.startsWith('invoice.')) {
    const sub = idOf(obj?.parent?.subscription_details?.subscription) ?? idOf(obj.subscription);
    if (!sub) return null;
    return { subscriptionId: sub, payloadState: null, accessIdHint: null };
  }
  return null;
}

function paddleSignal(body: any): Signal | null {
  const type: string = body.event_type;
  const data = body?.data;
  if (!data) return null;
  if (type.startsWith('subscription.')) {
    return { subscriptionId: String(data.id), payloadState: paddleSubscriptionState(data, String(body.event_id)), accessIdHint: null };
  }
  if (type.startsWith('transaction.') && typeof data.subscription_id === 'string') {
    const hint = data?.custom_data?.[ACCESS_ID_METADATA_KEY];
    return { subscriptionId: data.subscription_id, payloadState: null, accessIdHint: typeof hint === 'string' ? hint : null };
  }
  return null;
}

/** The subscription an event is about; null: an event type that says nothing of one. */
export function signalOf(provider: BillingProvider, body: any): Signal | null {
  return provider === 'STRIPE' ? stripeSignal(body) : paddleSignal(body);
}
