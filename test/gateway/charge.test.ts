/** A call's charge and ending (src/gateway/charge.ts) as pure functions of what its relay saw, its bounds and its prices. */
import { describe, expect, it } from 'vitest';
import { charge, endingOf, type RelaySaw } from '../../src/gateway/charge.js';
import type { Pricing } from '../../src/domain/quota/model-pricing.js';
import type { PreparedCall } from '../../src/protocols/inspectors.js';

/** 1 unit an input token, 0.5 a cached one, 4 an output token. */
const pricing: Pricing = {
  rule: 'gpt-*',
  inputMultiplierPpm: 1_000_000n,
  cachedInputMultiplierPpm: 500_000n,
  outputMultiplierPpm: 4_000_000n,
};

const prepared = (stream: boolean): PreparedCall => ({
  requestedModel: 'gpt-test',
  stream,
  body: Buffer.from('{}'),
  inputBound: 100n,
  outputBound: 50n,
  outputCeiling: 50n,
  usageInjected: false,
  previousResponseId: null,
  outputCap: undefined,
});

const saw = (over: Partial<RelaySaw>): RelaySaw => ({
  usage: null,
  complete: false,
  outputEstimate: 0n,
  cut: false,
  model: null,
  upstreamEnded: true,
  ...over,
});

const usage = (inputTokens: bigint, outputTokens: bigint, cachedInputTokens = 0n) => ({ inputTokens, cachedInputTokens, outputTokens });

describe('charge', () => {
  it('charges the usage the provider reported, priced by the rule the call was admitted at', () => {
    const c = charge(saw({ usage: usage(40n, 10n, 20n), complete: true, model: 'gpt-test-2026' }), prepared(false), pricing);
    // 20 uncached + 20 cached at half + 10 output at 4.
    expect(c).toMatchObject({ units: 70n, inputTokens: 40n, cachedInputTokens: 20n, outputTokens: 10n, model: 'gpt-test-2026' });
    expect(c.pricing).toBe(pricing);
    expect(c).toMatchObject({ overBound: false, pastBound: false, usageMissing: false, malformed: false });
  });

  it('charges a JSON answer without usage at its bounds, and counts it malformed when the upstream ended it', () => {
    const c = charge(saw({}), prepared(false), pricing);
    expect(c).toMatchObject({ units: 300n, inputTokens: 100n, outputTokens: 50n, model: 'gpt-test' });
    expect(c).toMatchObject({ usageMissing: true, malformed: true, overBound: false });
    // Its client left, or a shutdown cut it: still charged by the rule, not counted as malformed.
    expect(charge(saw({ upstreamEnded: false }), prepared(false), pricing)).toMatchObject({ units: 300n, malformed: false });
  });

  it('charges a stream that broke at what it reported, else what its meter counted, at most its bound', () => {
    const broke = charge(saw({ usage: usage(30n, 5n), outputEstimate: 12n }), prepared(true), pricing);
    expect(broke).toMatchObject({ inputTokens: 30n, outputTokens: 12n, units: 30n + 48n, usageMissing: true, malformed: true });
    const long = charge(saw({ outputEstimate: 80n }), prepared(true), pricing);
    expect(long).toMatchObject({ inputTokens: 100n, outputTokens: 50n });
  });

  it('charges a stream cut at its bound the whole bound: over it, neither learned from nor malformed', () => {
    const c = charge(saw({ usage: usage(30n, 20n), outputEstimate: 50n, cut: true }), prepared(true), pricing);
    expect(c).toMatchObject({ inputTokens: 30n, outputTokens: 50n, overBound: true, pastBound: false, malformed: false });
  });

  it('charges an answer past its bound as reported, and says so: the calls after it are admitted at that output', () => {
    const c = charge(saw({ usage: usage(10n, 80n), complete: true }), prepared(false), pricing);
    expect(c).toMatchObject({ outputTokens: 80n, units: 330n, overBound: true, pastBound: true, usageMissing: false });
  });

  it('records the reported model at most 256 characters long', () => {
    expect(charge(saw({ model: 'm'.repeat(300) }), prepared(false), pricing).model).toHaveLength(256);
  });
});

describe('endingOf', () => {
  const shutdown = new Error('shutdown');
  const relay = (over: Partial<Parameters<typeof endingOf>[0]>) => ({
    end: 'complete' as const,
    status: 200,
    clientGone: false,
    cancelReason: undefined,
    error: undefined,
    ...over,
  });

  it('tells an answer, an upstream error and a client that left apart', () => {
    expect(endingOf(relay({}), shutdown)).toMatchObject({
      status: 'SUCCEEDED',
      attempt: 'SUCCEEDED',
      errorCode: null,
      upstreamEnded: true,
    });
    expect(endingOf(relay({ status: 304 }), shutdown)).toMatchObject({ status: 'SUCCEEDED' });
    expect(endingOf(relay({ status: 502 }), shutdown)).toMatchObject({ status: 'UPSTREAM_ERROR', upstreamEnded: false });
    expect(endingOf(relay({ clientGone: true }), shutdown)).toMatchObject({ status: 'CLIENT_ABORTED', attempt: 'SUCCEEDED' });
  });

  it('tells a call stopped on our side, a stream that broke, and no answer by its cause', () => {
    const cut = relay({ end: 'broken', cancelReason: shutdown });
    expect(endingOf(cut, shutdown)).toMatchObject({ status: 'FAILED', attempt: 'ABORTED', errorCode: 'server_shutdown' });
    expect(endingOf(relay({ end: 'unanswered', clientGone: true }), shutdown)).toMatchObject({ errorCode: 'client_aborted' });
    expect(endingOf(relay({ end: 'broken' }), shutdown)).toMatchObject({ errorCode: 'upstream_stream_broken', upstreamEnded: true });
    const timeout = Object.assign(new Error('timeout'), { code: 'UND_ERR_HEADERS_TIMEOUT' });
    expect(endingOf(relay({ end: 'unanswered', status: undefined, error: timeout }), shutdown)).toMatchObject({
      errorCode: 'upstream_timeout',
    });
    expect(endingOf(relay({ end: 'unanswered', status: undefined, error: new Error('refused') }), shutdown)).toMatchObject({
      errorCode: 'upstream_unavailable',
    });
  });
});
