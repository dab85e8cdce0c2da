/**
 * The signature Nexus puts on a delivery is the one Standard Webhooks' own verifier accepts (several during a
 * rotation, any one of them enough), and a receiver's Retry-After is read as seconds or as an HTTP date.
 */
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { retryAfterMs } from '../../src/domain/events/webhook-delivery.js';
import { newWebhookSecret, signatureOf, webhookHeaders } from '../../src/domain/events/webhook-signature.js';

describe('webhook signatures', () => {
  const body = JSON.stringify({ type: 'webhook.test', timestamp: '2026-11-27T00:00:00.000Z', data: { webhookEndpointId: 'x' } });
  const now = Math.floor(Date.now() / 1000);

  it('verify with standardwebhooks under the secret, and not under another', () => {
    const secret = newWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    const headers = webhookHeaders([secret], 'msg-1', now, body);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(newWebhookSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(body.replace('x', 'y'), headers)).toThrow();
  });

  it('carry one v1 signature per secret during a rotation, each verifying alone', () => {
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()];
    const headers = webhookHeaders([current, previous], 'msg-2', now, body);
    expect(headers['webhook-signature']).toBe(`${signatureOf(current, 'msg-2', now, body)} ${signatureOf(previous, 'msg-2', now, body)}`);
    for (const secret of [current, previous]) expect(() => new Webhook(secret).verify(body, headers)).not.toThrow();
  });
});

describe('Retry-After', () => {
  const now = new Date('2026-11-27T00:00:00Z');
  it.each([
    ['seconds', '120', 120_000],
    ['an HTTP date', 'Fri, 27 Nov 2026 00:00:30 GMT', 30_000],
    ['a date past', 'Thu, 26 Nov 2026 00:00:00 GMT', 0],
    ['nothing', undefined, undefined],
    ['garbage', 'soon', undefined],
  ])('reads %s', (_name, value, expected) => {
    expect(retryAfterMs(value, now)).toBe(expected);
  });
});
