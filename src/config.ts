/**
 * The one place that reads the environment. Everything else receives a Config.
 */
import { Ajv } from 'ajv';
import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Config {
  nodeEnv: string;
  port: number;
  host: string;
  /** PostgreSQL URL; undefined means the embedded PGlite in dataDir. */
  databaseUrl: string | undefined;
  /** PostgreSQL schema to use (tests give each file its own). */
  databaseSchema: string | undefined;
  dataDir: string;
  /** Root Management Key accepted as given; undefined: generated on first start. */
  managementKey: string | undefined;
  /** Current 32-byte key for secrets at rest. */
  encryptionKey: Buffer;
  /** Older keys that still decrypt (rotation). */
  previousEncryptionKeys: Buffer[];
  publicUrl: string;
  allowPrivateUpstreams: boolean;
  logLevel: string;
  /** Largest accepted admin request body, bytes. */
  bodyLimitBytes: number;
  /** Largest accepted gateway request body, bytes. */
  gatewayBodyLimitBytes: number;
  shutdownTimeoutMs: number;
  /** Lifetime of an inference key when the request names none. */
  inferenceKeyTtlDays: number;
  /** Environment word in inference key prefixes: nx-live-..., nx-test-... */
  keyEnvironment: string;
  /** Upstream timeout before response headers, unless the connection sets one. */
  upstreamTimeoutMs: number;
  /** Timeout of the provider connection test/verify probe. */
  providerProbeTimeoutMs: number;
  /**
   * How long a gateway process's quota lease outlives its last heartbeat (five a TTL) before another
   * process may reclaim it: charge its calls in flight and return what it held.
   */
  reservationTtlMs: number;
  /** How long the gateway may trust a cached key lookup. */
  authCacheTtlMs: number;
  /** A gateway quota lease unused this long returns its units to the period. */
  quotaLeaseIdleMs: number;
  /**
   * Gateway writes (reservations, settlements, records) commit without waiting for
   * the WAL flush: faster, but a PostgreSQL crash can lose the last moments of them.
   */
  gatewayAsyncCommit: boolean;
  stripeApiBaseUrl: string | undefined;
  paddleApiBaseUrl: string | undefined;
  /** How long past_due keeps an access ACTIVE. */
  billingPastDueGraceMs: number;
  /** How long a rotated-out webhook secret stays valid. */
  webhookSecretOverlapMs: number;
}

const schema = {
  type: 'object',
  properties: {
    NODE_ENV: { type: 'string', default: 'development' },
    PORT: { type: 'integer', minimum: 0, maximum: 65535, default: 8080 },
    HOST: { type: 'string', minLength: 1, default: '127.0.0.1' },
    DATABASE_URL: { type: 'string', pattern: '^postgres(ql)?://' },
    NEXUS_DATABASE_SCHEMA: { type: 'string', pattern: '^[a-z_][a-z0-9_]{0,62}$' },
    NEXUS_DATA_DIR: { type: 'string', minLength: 1, default: './data' },
    NEXUS_MANAGEMENT_KEY: { type: 'string', minLength: 24 },
    NEXUS_ENCRYPTION_KEY: { type: 'string', minLength: 40 },
    NEXUS_PREVIOUS_ENCRYPTION_KEYS: { type: 'string' },
    // An origin, or an origin and a path prefix (behind a proxy that serves Nexus under one).
    NEXUS_PUBLIC_URL: { type: 'string', pattern: '^https?://[^/?#\\s]+(/[^?#\\s]*)?$' },
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: { type: 'boolean', default: false },
    NEXUS_LOG_LEVEL: { enum: ['error', 'warn', 'info', 'debug', 'silent'], default: 'info' },
    NEXUS_BODY_LIMIT_BYTES: { type: 'integer', minimum: 1024, default: 1048576 },
    NEXUS_GATEWAY_BODY_LIMIT_BYTES: { type: 'integer', minimum: 1024, default: 33554432 },
    NEXUS_SHUTDOWN_TIMEOUT_MS: { type: 'integer', minimum: 0, default: 10000 },
    NEXUS_INFERENCE_KEY_TTL_DAYS: { type: 'integer', minimum: 1, maximum: 3650, default: 365 },
    NEXUS_KEY_ENVIRONMENT: { type: 'string', pattern: '^[a-z]{2,8}$', default: 'live' },
    NEXUS_UPSTREAM_TIMEOUT_MS: { type: 'integer', minimum: 1000, default: 60000 },
    NEXUS_PROVIDER_PROBE_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 60000, default: 5000 },
    NEXUS_RESERVATION_TTL_MS: { type: 'integer', minimum: 1000, maximum: 60000, default: 10000 },
    NEXUS_AUTH_CACHE_TTL_MS: { type: 'integer', minimum: 0, maximum: 5000, default: 1000 },
    NEXUS_QUOTA_LEASE_IDLE_MS: { type: 'integer', minimum: 10, maximum: 60000, default: 1000 },
    NEXUS_GATEWAY_ASYNC_COMMIT: { type: 'boolean', default: false },
    NEXUS_STRIPE_API_BASE_URL: { type: 'string', pattern: '^https?://' },
    NEXUS_PADDLE_API_BASE_URL: { type: 'string', pattern: '^https?://' },
    NEXUS_BILLING_PAST_DUE_GRACE_HOURS: { type: 'number', minimum: 0, default: 72 },
    NEXUS_WEBHOOK_SECRET_OVERLAP_HOURS: { type: 'number', minimum: 0, default: 24 },
  },
} as const;

export class ConfigError extends Error {}

/** What a variable takes, where ajv's own words would quote a pattern. */
const PLAIN: Record<string, string> = {
  NEXUS_PUBLIC_URL: 'must be an http(s) origin, optionally with a path prefix (https://gw.example.com or https://example.com/nexus)',
  NEXUS_DATABASE_SCHEMA: 'must be a lowercase PostgreSQL identifier (letters, digits, _)',
  NEXUS_KEY_ENVIRONMENT: 'must be 2 to 8 lowercase letters',
};

function decodeKey(name: string, value: string): Buffer {
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) throw new ConfigError(`${name} must be 32 bytes, base64-encoded (openssl rand -base64 32)`);
  return key;
}

/**
 * The dev-only fallback: a key generated once into the data dir. Written whole under another name and linked
 * into place, which fails if the file exists: of processes starting at once on a new data dir (the server and
 * the CLI, say) one writes the key and all read it. Written in place after a check, each could write its own
 * and go on with it, sealing secrets under a key the file no longer held (seen with 12 processes started together).
 */
function devEncryptionKey(dataDir: string, warn: (msg: string) => void): Buffer {
  const file = join(dataDir, 'encryption.key');
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true });
    const key = randomBytes(32).toString('base64') + '\n';
    const draft = `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
    writeFileSync(draft, key, { mode: 0o600 });
    let created = true;
    try {
      linkSync(draft, file);
    } catch (err) {
      created = false;
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') {
        // A file system without hard links: created exclusively in place instead.
        try {
          writeFileSync(file, key, { mode: 0o600, flag: 'wx' });
          created = true;
        } catch (again) {
          if ((again as NodeJS.ErrnoException).code !== 'EEXIST') throw again;
        }
      }
    } finally {
      unlinkSync(draft);
    }
    if (created) warn(`NEXUS_ENCRYPTION_KEY is unset: generated a development key in ${file}. Set it in production.`);
  }
  return decodeKey(file, readFileSync(file, 'utf8').trim());
}

export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  warn: (msg: string) => void = (msg) => console.warn(msg),
): Config {
  const raw: Record<string, unknown> = {};
  for (const key of Object.keys(schema.properties)) {
    const value = env[key];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const ajv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true });
  const validate = ajv.compile(schema);
  if (!validate(raw)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath.slice(1) || 'environment'} ${PLAIN[e.instancePath.slice(1)] ?? e.message}`);
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
  }
  const v = raw as any;
  if (v.NODE_ENV === 'production' && !v.NEXUS_ENCRYPTION_KEY) {
    throw new ConfigError('NEXUS_ENCRYPTION_KEY is required when NODE_ENV=production');
  }
  const encryptionKey = v.NEXUS_ENCRYPTION_KEY
    ? decodeKey('NEXUS_ENCRYPTION_KEY', v.NEXUS_ENCRYPTION_KEY)
    : devEncryptionKey(v.NEXUS_DATA_DIR, warn);
  const previousEncryptionKeys = String(v.NEXUS_PREVIOUS_ENCRYPTION_KEYS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => decodeKey('NEXUS_PREVIOUS_ENCRYPTION_KEYS', s));
  return {
    nodeEnv: v.NODE_ENV,
    port: v.PORT,
    host: v.HOST,
    databaseUrl: v.DATABASE_URL,
    databaseSchema: v.NEXUS_DATABASE_SCHEMA,
    dataDir: v.NEXUS_DATA_DIR,
    managementKey: v.NEXUS_MANAGEMENT_KEY,
    encryptionKey,
    previousEncryptionKeys,
    publicUrl: v.NEXUS_PUBLIC_URL?.replace(/\/+$/, '') ?? `http://${v.HOST.includes(':') ? `[${v.HOST}]` : v.HOST}:${v.PORT}`,
    allowPrivateUpstreams: v.NEXUS_ALLOW_PRIVATE_UPSTREAMS,
    logLevel: v.NEXUS_LOG_LEVEL,
    bodyLimitBytes: v.NEXUS_BODY_LIMIT_BYTES,
    gatewayBodyLimitBytes: v.NEXUS_GATEWAY_BODY_LIMIT_BYTES,
    shutdownTimeoutMs: v.NEXUS_SHUTDOWN_TIMEOUT_MS,
    inferenceKeyTtlDays: v.NEXUS_INFERENCE_KEY_TTL_DAYS,
    keyEnvironment: v.NEXUS_KEY_ENVIRONMENT,
    upstreamTimeoutMs: v.NEXUS_UPSTREAM_TIMEOUT_MS,
    providerProbeTimeoutMs: v.NEXUS_PROVIDER_PROBE_TIMEOUT_MS,
    reservationTtlMs: v.NEXUS_RESERVATION_TTL_MS,
    authCacheTtlMs: v.NEXUS_AUTH_CACHE_TTL_MS,
    quotaLeaseIdleMs: v.NEXUS_QUOTA_LEASE_IDLE_MS,
    gatewayAsyncCommit: v.NEXUS_GATEWAY_ASYNC_COMMIT,
    stripeApiBaseUrl: v.NEXUS_STRIPE_API_BASE_URL,
    paddleApiBaseUrl: v.NEXUS_PADDLE_API_BASE_URL,
    billingPastDueGraceMs: Math.round(v.NEXUS_BILLING_PAST_DUE_GRACE_HOURS * 3600_000),
    webhookSecretOverlapMs: Math.round(v.NEXUS_WEBHOOK_SECRET_OVERLAP_HOURS * 3600_000),
  };
}
