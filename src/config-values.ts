/** The kinds of environment variable src/config.ts's schema is made of: each with the message a bad value gets. */
import { z } from 'zod';

const HOUR_MS = 3600_000;

/** An integer variable, with ajv-style messages ('PORT must be integer'). */
export function integer(min: number, max: number | undefined, fallback: number) {
  return optionalInteger(min, max).unwrap().default(fallback);
}

/** An integer variable without a default (undefined when unset). */
export function optionalInteger(min: number, max: number | undefined) {
  let schema = z.coerce
    .number({ error: 'must be integer' })
    .int({ error: 'must be integer' })
    .min(min, { error: `must be >= ${min}` });
  if (max !== undefined) schema = schema.max(max, { error: `must be <= ${max}` });
  return schema.optional();
}

export const hours = (fallback: number) =>
  z.coerce
    .number({ error: 'must be number' })
    .min(0, { error: 'must be >= 0' })
    .default(fallback)
    .transform((h) => Math.round(h * HOUR_MS));

export const flag = (fallback: boolean) =>
  z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true');

export const httpUrl = z.string().regex(/^https?:\/\//, { error: 'must be an http(s) URL' });
