/**
 * Per-model pricing and the model allow-list of a quota strategy (docs/pricing.md).
 *
 * A pattern is an exact model name or a glob whose only wildcard is `*` (any run of characters,
 * none included), matched against the whole name, case-sensitively. A strategy's model rules are
 * tried in list order and the first that matches prices the call; a model none matches is priced at
 * the strategy's own multipliers. The model is the one the REQUEST names: what the provider reports
 * answering (a dated alias, say) never changes the rule. Pure; no I/O.
 */
import type { Multipliers } from './quota-math.js';

/** The multipliers of the kinds beyond text tokens (quota-math.ts), each optional. */
export type KindMultipliers = Omit<Multipliers, 'inputMultiplierPpm' | 'cachedInputMultiplierPpm' | 'outputMultiplierPpm'>;

/** The per-kind multipliers that are single figures, by name (imageTierMultipliersPpm is a map). */
export const KIND_MULTIPLIERS = [
  'audioInputMultiplierPpm',
  'audioOutputMultiplierPpm',
  'imageInputMultiplierPpm',
  'imageOutputMultiplierPpm',
  'imageMultiplierPpm',
  'secondMultiplierPpm',
  'characterMultiplierPpm',
] as const;

/**
 * The kinds' multipliers as stored (quota_strategies.kind_multipliers, and in each model rule) and on the wire:
 * decimal strings, those absent left out.
 */
export type StoredKindMultipliers = Partial<Record<(typeof KIND_MULTIPLIERS)[number], string>> & {
  imageTierMultipliersPpm?: Record<string, string>;
};

/** A model rule as stored (quota_strategies.model_rules) and on the wire: multipliers as decimal strings. */
export interface StoredModelRule extends StoredKindMultipliers {
  pattern: string;
  inputMultiplierPpm: string;
  cachedInputMultiplierPpm: string;
  outputMultiplierPpm: string;
}

/** Stored kinds' multipliers (decimal strings) as bigints; null or {}: none (every kind at its default). */
export function kindsFromStored(stored: StoredKindMultipliers | null | undefined): KindMultipliers {
  const kinds: KindMultipliers = {};
  if (!stored) return kinds;
  for (const name of KIND_MULTIPLIERS) {
    const value = stored[name];
    if (value !== undefined) kinds[name] = BigInt(value);
  }
  const tiers = stored.imageTierMultipliersPpm;
  if (tiers) kinds.imageTierMultipliersPpm = Object.fromEntries(Object.entries(tiers).map(([tier, v]) => [tier, BigInt(v)]));
  return kinds;
}

/** Kinds' multipliers as stored: those set, as decimal strings. */
export function kindsToStored(kinds: KindMultipliers): StoredKindMultipliers {
  const stored: StoredKindMultipliers = {};
  for (const name of KIND_MULTIPLIERS) {
    const value = kinds[name];
    if (value !== undefined && value !== null) stored[name] = `${value}`;
  }
  const tiers = kinds.imageTierMultipliersPpm;
  if (tiers) stored.imageTierMultipliersPpm = Object.fromEntries(Object.entries(tiers).map(([tier, v]) => [tier, `${v}`]));
  return stored;
}

export interface ModelRule extends Multipliers {
  pattern: string;
}

/** What a call is priced at: the multipliers, and the pattern of the rule they came from (null: the strategy's own). */
export interface Pricing extends Multipliers {
  rule: string | null;
}

const MAX_PATTERN_LENGTH = 256;
/** Whitespace, control characters and the glob syntax Nexus does not support (`?`, classes, alternatives, escapes). */
const FORBIDDEN = /[\s\p{Cc}?[\]{}\\]/u;

/** Why a pattern is refused, or undefined when it is a valid one. */
export function patternProblem(pattern: string): string | undefined {
  if (pattern.length === 0) return 'must not be empty';
  if (pattern.length > MAX_PATTERN_LENGTH) return `must be at most ${MAX_PATTERN_LENGTH} characters`;
  const bad = FORBIDDEN.exec(pattern);
  if (bad) {
    return /\s|\p{Cc}/u.test(bad[0])
      ? 'must not contain whitespace or control characters'
      : `must be a model name or a glob whose only wildcard is * (found '${bad[0]}')`;
  }
  return undefined;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A pattern as a test of a model name. */
function matcherOf(pattern: string): (model: string) => boolean {
  if (!pattern.includes('*')) return (model) => model === pattern;
  const regex = new RegExp(`^${pattern.split('*').map(escapeRegExp).join('.*')}$`, 's');
  return (model) => regex.test(model);
}

/** Stored rules (decimal strings) as multipliers. */
export function rulesFromStored(stored: readonly StoredModelRule[]): ModelRule[] {
  return stored.map((r) => ({
    pattern: r.pattern,
    inputMultiplierPpm: BigInt(r.inputMultiplierPpm),
    cachedInputMultiplierPpm: BigInt(r.cachedInputMultiplierPpm),
    outputMultiplierPpm: BigInt(r.outputMultiplierPpm),
    ...kindsFromStored(r),
  }));
}

export function rulesToStored(rules: readonly ModelRule[]): StoredModelRule[] {
  return rules.map((r) => ({
    pattern: r.pattern,
    inputMultiplierPpm: `${r.inputMultiplierPpm}`,
    cachedInputMultiplierPpm: `${r.cachedInputMultiplierPpm}`,
    outputMultiplierPpm: `${r.outputMultiplierPpm}`,
    ...kindsToStored(r),
  }));
}

/** Models priced (and allowed or not) lately, per policy: calls name a few models over and over. */
const MEMO_SIZE = 64;

/** A strategy's model rules and allow-list, compiled once (per cached key lookup) and asked per call. */
export interface ModelPolicy {
  /** Whether the strategy lists the models it allows (a call naming none is then refused). */
  readonly restricted: boolean;
  pricingFor(model: string): Pricing;
  allows(model: string): boolean;
}

export function compileModelPolicy(defaults: Multipliers, rules: readonly ModelRule[], allowed: readonly string[] | null): ModelPolicy {
  const fallback: Pricing = { ...defaults, rule: null };
  // A rule's kinds are its own: one it leaves out takes its default from the rule's multipliers, not the strategy's.
  const compiled = rules.map(({ pattern, ...multipliers }) => ({
    test: matcherOf(pattern),
    pricing: { ...multipliers, rule: pattern } satisfies Pricing,
  }));
  const allowTests = allowed ? allowed.map(matcherOf) : null;
  const priced = new Map<string, Pricing>();
  const admitted = new Map<string, boolean>();
  const remember = <T>(memo: Map<string, T>, model: string, value: T): T => {
    if (memo.size >= MEMO_SIZE) memo.delete(memo.keys().next().value!);
    memo.set(model, value);
    return value;
  };
  return {
    restricted: allowTests !== null,
    pricingFor(model: string): Pricing {
      if (compiled.length === 0) return fallback;
      const known = priced.get(model);
      if (known) return known;
      return remember(priced, model, compiled.find((r) => r.test(model))?.pricing ?? fallback);
    },
    allows(model: string): boolean {
      if (allowTests === null) return true;
      const known = admitted.get(model);
      if (known !== undefined) return known;
      return remember(admitted, model, model !== '' && allowTests.some((test) => test(model)));
    },
  };
}
