/** The pure rule of per-model pricing and the allow-list (src/domain/quota/model-pricing.ts). */
import { describe, expect, it } from 'vitest';
import { compileModelPolicy, patternProblem, rulesFromStored } from '../../src/domain/quota/model-pricing.js';

const DEFAULTS = { inputMultiplierPpm: 1_000_000n, cachedInputMultiplierPpm: 500_000n, outputMultiplierPpm: 2_000_000n };
const rule = (pattern: string, ppm: bigint) => ({
  pattern,
  inputMultiplierPpm: ppm,
  cachedInputMultiplierPpm: ppm,
  outputMultiplierPpm: ppm,
});

describe('model rules', () => {
  const policy = compileModelPolicy(
    DEFAULTS,
    [rule('gpt-4o-mini*', 1n), rule('gpt-4o*', 2n), rule('claude-3-5-haiku-20241022', 3n), rule('*-preview', 4n)],
    null,
  );

  it('the first rule in list order that matches applies', () => {
    expect(policy.pricingFor('gpt-4o-mini-2024-07-18')).toMatchObject({ rule: 'gpt-4o-mini*', inputMultiplierPpm: 1n });
    expect(policy.pricingFor('gpt-4o')).toMatchObject({ rule: 'gpt-4o*', inputMultiplierPpm: 2n });
    // Matches both gpt-4o* and *-preview: the earlier wins.
    expect(policy.pricingFor('gpt-4o-audio-preview')).toMatchObject({ rule: 'gpt-4o*' });
    expect(policy.pricingFor('o1-preview')).toMatchObject({ rule: '*-preview', outputMultiplierPpm: 4n });
  });

  it('an exact name matches only itself, a glob the whole name, case-sensitively; no rule: the defaults', () => {
    expect(policy.pricingFor('claude-3-5-haiku-20241022')).toMatchObject({ rule: 'claude-3-5-haiku-20241022' });
    expect(policy.pricingFor('claude-3-5-haiku-20241022-v2')).toEqual({ rule: null, ...DEFAULTS });
    expect(policy.pricingFor('my-gpt-4o')).toEqual({ rule: null, ...DEFAULTS });
    expect(policy.pricingFor('GPT-4o')).toEqual({ rule: null, ...DEFAULTS });
    expect(policy.pricingFor('')).toEqual({ rule: null, ...DEFAULTS });
    // Regular-expression characters in a pattern are literal.
    const dotted = compileModelPolicy(DEFAULTS, [rule('gpt-4.1*', 9n)], null);
    expect(dotted.pricingFor('gpt-4.1-nano').rule).toBe('gpt-4.1*');
    expect(dotted.pricingFor('gpt-491').rule).toBeNull();
  });

  it('answers the same after its memo of models is full', () => {
    for (let i = 0; i < 200; i++) expect(policy.pricingFor(`gpt-4o-${i}`).rule).toBe('gpt-4o*');
    expect(policy.pricingFor('gpt-4o-mini').rule).toBe('gpt-4o-mini*');
  });

  it('stored rules (decimal strings) read as bigints', () => {
    expect(
      rulesFromStored([
        { pattern: 'x', inputMultiplierPpm: '9223372036854775807', cachedInputMultiplierPpm: '0', outputMultiplierPpm: '7' },
      ]),
    ).toEqual([{ pattern: 'x', inputMultiplierPpm: 9223372036854775807n, cachedInputMultiplierPpm: 0n, outputMultiplierPpm: 7n }]);
  });
});

describe('the allow-list', () => {
  it('absent: every model, even none', () => {
    const open = compileModelPolicy(DEFAULTS, [], null);
    expect(open.restricted).toBe(false);
    expect(open.allows('anything')).toBe(true);
    expect(open.allows('')).toBe(true);
  });

  it('set: only the models its patterns match; a request naming none is not allowed', () => {
    const list = compileModelPolicy(DEFAULTS, [], ['gpt-4o*', 'claude-sonnet-4-5']);
    expect(list.restricted).toBe(true);
    expect(list.allows('gpt-4o-mini')).toBe(true);
    expect(list.allows('claude-sonnet-4-5')).toBe(true);
    expect(list.allows('claude-sonnet-4-5-20250929')).toBe(false);
    expect(list.allows('gpt-3.5-turbo')).toBe(false);
    expect(list.allows('')).toBe(false);
  });
});

describe('patterns', () => {
  it.each(['gpt-4o', 'gpt-4o*', '*', 'claude-3-5-haiku-*', 'meta-llama/Llama-3.1-8B', 'ft:gpt-4o:org::id', 'claude-3-5-sonnet@20240620'])(
    'accepts %s',
    (p) => {
      expect(patternProblem(p)).toBeUndefined();
    },
  );
  it.each([
    ['', /empty/],
    ['gpt-4?', /only wildcard/],
    ['gpt-[34]o', /only wildcard/],
    ['{a,b}', /only wildcard/],
    ['a\\*', /only wildcard/],
    ['gpt 4o', /whitespace/],
    ['gpt\t4o', /whitespace/],
    ['m'.repeat(257), /at most 256/],
  ])('refuses %j', (p, why) => {
    expect(patternProblem(p)).toMatch(why);
  });
});
