/**
 * Webhook signatures, checked on the raw body with constant-time comparisons.
 * Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, HMAC-SHA256 of `t.body`,
 * within a tolerance of the timestamp. Paddle: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=...]`,
 * HMAC-SHA256 of `ts:body`. Any of the listed signatures may match (providers list several
 * while they roll their own secrets).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const STRIPE_TOLERANCE_SECONDS = 300;
/** Paddle has no documented tolerance; the same bound as Stripe's keeps replays short. */
const PADDLE_TOLERANCE_SECONDS = 300;

type SignatureFailure = 'missing_signature' | 'malformed_signature' | 'timestamp_out_of_tolerance' | 'no_matching_signature';

export type SignatureResult = { ok: true; timestamp: number } | { ok: false; reason: SignatureFailure };

interface ParsedHeader {
  timestamp: number;
  signatures: string[];
}

function parseHeader(header: string, separator: string, tsKey: string, sigKey: string): ParsedHeader | null {
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(separator)) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === tsKey && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (key === sigKey && /^[0-9a-fA-F]{64}$/.test(value)) signatures.push(value.toLowerCase());
  }
  if (timestamp === null || signatures.length === 0) return null;
  return { timestamp, signatures };
}

function anyMatches(expectedHex: string, candidates: string[]): boolean {
  const expected = Buffer.from(expectedHex, 'hex');
  let matched = false;
  // Compare against every candidate (no early exit) so timing says nothing about which matched.
  for (const candidate of candidates) {
    const given = Buffer.from(candidate, 'hex');
    if (given.length === expected.length && timingSafeEqual(given, expected)) matched = true;
  }
  return matched;
}

function check(
  rawBody: Buffer,
  header: string | undefined,
  secrets: string[],
  nowSeconds: number,
  format: { separator: string; tsKey: string; sigKey: string; joiner: string; tolerance: number },
): SignatureResult & { secretIndex?: number } {
  if (!header) return { ok: false, reason: 'missing_signature' };
  const parsed = parseHeader(header, format.separator, format.tsKey, format.sigKey);
  if (!parsed) return { ok: false, reason: 'malformed_signature' };
  if (Math.abs(nowSeconds - parsed.timestamp) > format.tolerance) return { ok: false, reason: 'timestamp_out_of_tolerance' };
  const signed = Buffer.concat([Buffer.from(`${parsed.timestamp}${format.joiner}`, 'utf8'), rawBody]);
  for (let i = 0; i < secrets.length; i++) {
    const expected = createHmac('sha256', secrets[i]!).update(signed).digest('hex');
    if (anyMatches(expected, parsed.signatures)) return { ok: true, timestamp: parsed.timestamp, secretIndex: i };
  }
  return { ok: false, reason: 'no_matching_signature' };
}

/** `secrets`: the current one first, then a still-valid previous one; `secretIndex` says which matched. */
export function verifyStripeSignature(rawBody: Buffer, header: string | undefined, secrets: string[], now: Date) {
  return check(rawBody, header, secrets, Math.floor(now.getTime() / 1000), {
    separator: ',',
    tsKey: 't',
    sigKey: 'v1',
    joiner: '.',
    tolerance: STRIPE_TOLERANCE_SECONDS,
  });
}

export function verifyPaddleSignature(rawBody: Buffer, header: string | undefined, secrets: string[], now: Date) {
  return check(rawBody, header, secrets, Math.floor(now.getTime() / 1000), {
    separator: ';',
    tsKey: 'ts',
    sigKey: 'h1',
    joiner: ':',
    tolerance: PADDLE_TOLERANCE_SECONDS,
  });
}
