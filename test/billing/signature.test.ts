/**
 * The signature checks, against the providers' own packages: Stripe's test header
 * generator and constructEvent, and Paddle's SDK verifier.
 */
import { createHmac } from 'node:crypto';
import { Environment, Paddle } from '@paddle/paddle-node-sdk';
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { verifyPaddleSignature, verifyStripeSignature } from '../../src/domain/billing/signature.js';
import { FakePaddle } from './fake-paddle.js';

const SECRET = 'whsec_unit_0123456789abcdef';
const OTHER = 'whsec_unit_other_secret_9876';
const body = JSON.stringify({
  id: 'evt_1',
  object: 'event',
  type: 'customer.subscription.updated',
  created: 1_790_000_000,
  data: { object: { id: 'sub_1' } },
});
const now = new Date('2026-11-01T00:00:00Z');
const ts = Math.floor(now.getTime() / 1000);
const buf = (s: string) => Buffer.from(s, 'utf8');
const hmac = (secret: string, payload: string) => createHmac('sha256', secret).update(payload).digest('hex');

describe('Stripe-Signature', () => {
  it('accepts the header the official package generates, which constructEvent accepts too', () => {
    const header = Stripe.webhooks.generateTestHeaderString({ payload: body, secret: SECRET, timestamp: ts });
    expect(verifyStripeSignature(buf(body), header, [SECRET], now)).toMatchObject({ ok: true, timestamp: ts, secretIndex: 0 });
    expect(Stripe.webhooks.constructEvent(body, header, SECRET, 300, undefined, ts).id).toBe('evt_1');
  });

  it('accepts any of several v1 signatures, and says which secret matched', () => {
    const header = `t=${ts},v1=${hmac(OTHER, `${ts}.${body}`)},v0=abc,v1=${hmac(SECRET, `${ts}.${body}`)}`;
    expect(verifyStripeSignature(buf(body), header, [SECRET], now)).toMatchObject({ ok: true });
    expect(verifyStripeSignature(buf(body), `t=${ts},v1=${hmac(OTHER, `${ts}.${body}`)}`, [SECRET, OTHER], now)).toMatchObject({
      ok: true,
      secretIndex: 1,
    });
  });

  it.each([
    ['missing', undefined, 'missing_signature'],
    ['without a timestamp', `v1=${hmac(SECRET, `${ts}.${body}`)}`, 'malformed_signature'],
    ['without v1', `t=${ts},v0=${hmac(SECRET, `${ts}.${body}`)}`, 'malformed_signature'],
    ['signed with another secret', `t=${ts},v1=${hmac(OTHER, `${ts}.${body}`)}`, 'no_matching_signature'],
    ['for another body', `t=${ts},v1=${hmac(SECRET, `${ts}.${body} `)}`, 'no_matching_signature'],
    ['older than 300 s', `t=${ts - 301},v1=${hmac(SECRET, `${ts - 301}.${body}`)}`, 'timestamp_out_of_tolerance'],
    ['from the future beyond 300 s', `t=${ts + 301},v1=${hmac(SECRET, `${ts + 301}.${body}`)}`, 'timestamp_out_of_tolerance'],
  ])('refuses a header %s', (_label, header, reason) => {
    expect(verifyStripeSignature(buf(body), header, [SECRET], now)).toEqual({ ok: false, reason });
  });

  it('accepts a timestamp 299 s old', () => {
    const header = `t=${ts - 299},v1=${hmac(SECRET, `${ts - 299}.${body}`)}`;
    expect(verifyStripeSignature(buf(body), header, [SECRET], now).ok).toBe(true);
  });
});

describe('Paddle-Signature', () => {
  const paddleBody = JSON.stringify({
    event_id: 'evt_01',
    event_type: 'subscription.updated',
    occurred_at: '2026-11-01T00:00:00Z',
    data: { id: 'sub_01' },
  });

  it('the HMAC computed in the test is one the Paddle SDK verifier accepts, and so does ours', async () => {
    const realNow = new Date();
    const header = FakePaddle.sign(paddleBody, SECRET, realNow);
    const paddle = new Paddle('pdl_sdbx_apikey_unit', { environment: Environment.sandbox });
    expect(await paddle.webhooks.isSignatureValid(paddleBody, SECRET, header)).toBe(true);
    expect(verifyPaddleSignature(buf(paddleBody), header, [SECRET], realNow).ok).toBe(true);
  });

  it('accepts any h1 (the SDK reads only the last one)', async () => {
    const realNow = new Date();
    const valid = hmac(SECRET, `${Math.floor(realNow.getTime() / 1000)}:${paddleBody}`);
    const header = `ts=${Math.floor(realNow.getTime() / 1000)};h1=${valid};h1=${'0'.repeat(64)}`;
    expect(verifyPaddleSignature(buf(paddleBody), header, [SECRET], realNow).ok).toBe(true);
    const paddle = new Paddle('pdl_sdbx_apikey_unit', { environment: Environment.sandbox });
    expect(await paddle.webhooks.isSignatureValid(paddleBody, SECRET, header)).toBe(false);
  });

  it.each([
    ['missing', undefined, 'missing_signature'],
    ['malformed', 'ts=abc;h1=zz', 'malformed_signature'],
    ['signed with another secret', `ts=${ts};h1=${hmac(OTHER, `${ts}:${paddleBody}`)}`, 'no_matching_signature'],
    ['signed the Stripe way', `ts=${ts};h1=${hmac(SECRET, `${ts}.${paddleBody}`)}`, 'no_matching_signature'],
    ['too old', `ts=${ts - 301};h1=${hmac(SECRET, `${ts - 301}:${paddleBody}`)}`, 'timestamp_out_of_tolerance'],
  ])('refuses a header %s', (_label, header, reason) => {
    expect(verifyPaddleSignature(buf(paddleBody), header, [SECRET], now)).toEqual({ ok: false, reason });
  });
});
