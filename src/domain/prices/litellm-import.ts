/**
 * LiteLLM's `model_prices_and_context_window.json`: model id -> { input_cost_per_token, output_cost_per_token, ... }
 * in USD per token. Read into prices per million tokens, exactly: a JSON number's shortest decimal form (what
 * JSON.parse read, as JavaScript prints it back) with its point moved six places, no floating-point arithmetic.
 */
import { AppError } from '../../errors.js';

export interface ImportedPrice {
  modelPattern: string;
  inputPerMillion: string;
  cachedInputPerMillion: string | null;
  cacheWritePerMillion: string | null;
  outputPerMillion: string;
  reasoningPerMillion: string | null;
}

/** LiteLLM's field -> ours. */
const FIELDS = {
  input_cost_per_token: 'inputPerMillion',
  cache_read_input_token_cost: 'cachedInputPerMillion',
  cache_creation_input_token_cost: 'cacheWritePerMillion',
  output_cost_per_token: 'outputPerMillion',
  output_cost_per_reasoning_token: 'reasoningPerMillion',
} as const;

/** The documentation entry LiteLLM's file starts with. */
const SAMPLE_KEY = 'sample_spec';
const MAX_FRACTION = 12;

/** A non-negative JSON number of USD per token as a decimal string per million tokens; undefined when it is not one. */
export function perMillion(value: number): string | undefined {
  if (!Number.isFinite(value) || value < 0) return undefined;
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(value));
  if (!m) return undefined;
  const digits = m[1]! + (m[2] ?? '');
  const point = m[1]!.length + Number(m[3] ?? 0) + 6;
  const padded = point <= 0 ? '0'.repeat(1 - point) + digits : digits.padEnd(point, '0');
  const at = Math.max(point, 1);
  const whole = padded.slice(0, at).replace(/^0+(?=\d)/, '');
  const fraction = padded.slice(at).replace(/0+$/, '');
  if (fraction.length > MAX_FRACTION) return undefined;
  return fraction ? `${whole}.${fraction}` : whole;
}

export interface LiteLlmImport {
  prices: ImportedPrice[];
  /** Entries not priced per token (images, audio by the second, ...), and the sample. */
  skipped: string[];
}

/** Reads the file's object; the first entry or field not in the format refuses it all (400, `param` naming its key). */
export function readLiteLlmPrices(file: Record<string, unknown>): LiteLlmImport {
  const prices: ImportedPrice[] = [];
  const skipped: string[] = [];
  for (const [key, entry] of Object.entries(file)) {
    const param = `prices.${key}`;
    if (key === SAMPLE_KEY) {
      skipped.push(key);
      continue;
    }
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      throw new AppError('invalid_parameter', `${param} must be an object of a model's prices`, { param });
    }
    const fields = entry as Record<string, unknown>;
    const read: Partial<Record<(typeof FIELDS)[keyof typeof FIELDS], string>> = {};
    for (const [field, ours] of Object.entries(FIELDS)) {
      const value = fields[field];
      if (value === undefined || value === null) continue;
      const decimal = typeof value === 'number' ? perMillion(value) : undefined;
      if (decimal === undefined) {
        throw new AppError('invalid_parameter', `${param}.${field} must be a non-negative number of USD per token`, {
          param: `${param}.${field}`,
        });
      }
      read[ours] = decimal;
    }
    if (read.inputPerMillion === undefined || read.outputPerMillion === undefined) {
      skipped.push(key);
      continue;
    }
    prices.push({
      modelPattern: key,
      inputPerMillion: read.inputPerMillion,
      cachedInputPerMillion: read.cachedInputPerMillion ?? null,
      cacheWritePerMillion: read.cacheWritePerMillion ?? null,
      outputPerMillion: read.outputPerMillion,
      reasoningPerMillion: read.reasoningPerMillion ?? null,
    });
  }
  return { prices, skipped };
}
