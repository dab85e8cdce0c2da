/**
 * The one place that reads the environment. Everything else receives a Config.
 *
 * One zod schema says, per variable, what it takes, its default and the message a
 * bad value gets, and maps the variables to the Config's fields; the Config type is
 * derived from it, so no field is declared a second time. loadConfig returns it frozen.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { ArchiveConfigError, archiveFields, archiveVariables } from './config-archive.js';
import { peopleFields, peopleVariables, PeopleConfigError } from './config-people.js';
import { flag, hours, httpUrl, integer, optionalInteger } from './config-values.js';
import { trustProxyOf } from './trust-proxy.js';

export class ConfigError extends Error {}

const LEASE_TTL_MS = 10_000;

function decodeKey(name: string, value: string): Buffer {
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) throw new ConfigError(`${name} must be 32 bytes, base64-encoded (openssl rand -base64 32)`);
  return key;
}

/** The environment's variables: what each takes, its default, and the message a bad value gets. */
const variables = z.object({
  NODE_ENV: z.string().default('development'),
  PORT: integer(0, 65535, 8080),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, { error: 'must be a postgres:// or postgresql:// URL' })
    .optional(),
  NEXUS_DATABASE_LISTEN_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, { error: 'must be a postgres:// or postgresql:// URL' })
    .optional(),
  NEXUS_DATABASE_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, { error: 'must be a lowercase PostgreSQL identifier (letters, digits, _)' })
    .optional(),
  NEXUS_DATABASE_PREPARED_STATEMENTS: flag(true),
  NEXUS_DATABASE_POOL_MAX: integer(1, 1000, 10),
  NEXUS_GATEWAY_POOL_IDLE_MS: integer(1000, undefined, 300_000),
  NEXUS_DATABASE_STARTUP_TIMEOUT_MS: integer(0, undefined, 300_000),
  NEXUS_WORKERS: integer(1, 256, 1),
  NEXUS_DATA_DIR: z.string().min(1).default('./data'),
  NEXUS_MANAGEMENT_KEY: z.string().min(24, { error: 'must be at least 24 characters long' }).optional(),
  NEXUS_ENCRYPTION_KEY: z.string().min(40, { error: 'must be 32 bytes, base64-encoded (openssl rand -base64 32)' }).optional(),
  NEXUS_PREVIOUS_ENCRYPTION_KEYS: z.string().optional(),
  // An origin, or an origin and a path prefix (behind a proxy that serves Nexus under one).
  NEXUS_PUBLIC_URL: z
    .string()
    .regex(/^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/, {
      error: 'must be an http(s) origin, optionally with a path prefix (https://gw.example.com or https://example.com/nexus)',
    })
    .optional(),
  NEXUS_TRUST_PROXY: z
    .string()
    .default('false')
    .transform((value, ctx) => {
      const trust = trustProxyOf(value);
      if (typeof trust === 'string') {
        ctx.addIssue({
          code: 'custom',
          message: `must be false, true, or a comma-separated list of the proxies' addresses or CIDR ranges (10.0.0.0/8, ::1, loopback): '${trust}' is none of these`,
        });
        return z.NEVER;
      }
      return trust;
    }),
  NEXUS_ALLOW_PRIVATE_UPSTREAMS: flag(false),
  NEXUS_LOG_LEVEL: z
    .enum(['error', 'warn', 'info', 'debug', 'silent'], { error: 'must be one of error, warn, info, debug, silent' })
    .default('info'),
  NEXUS_BODY_LIMIT_BYTES: integer(1024, undefined, 1048576),
  NEXUS_EXPORTS_AT_ONCE: integer(1, 100, 3),
  NEXUS_USAGE_DAY_CACHE_MB: integer(0, 4096, 64),
  NEXUS_GATEWAY_BODY_LIMIT_BYTES: integer(1024, undefined, 33554432),
  NEXUS_BODY_TIMEOUT_MS: integer(1000, 3600000, 30000),
  NEXUS_SHUTDOWN_TIMEOUT_MS: integer(0, undefined, 10000),
  NEXUS_EVENT_LOOP_BLOCKED_MS: integer(100, 600000, 5000),
  NEXUS_INFERENCE_KEY_TTL_DAYS: integer(1, 3650, 365),
  NEXUS_KEY_ENVIRONMENT: z
    .string()
    .regex(/^[a-z]{2,8}$/, { error: 'must be 2 to 8 lowercase letters' })
    .default('live'),
  NEXUS_UPSTREAM_TIMEOUT_MS: integer(1000, undefined, 60000),
  NEXUS_PROVIDER_PROBE_TIMEOUT_MS: integer(100, 60000, 5000),
  NEXUS_LEASE_TTL_MS: optionalInteger(1000, 60000),
  // The former name of NEXUS_LEASE_TTL_MS, read when that one is unset; removed in the next major release.
  NEXUS_RESERVATION_TTL_MS: optionalInteger(1000, 60000),
  NEXUS_CALL_SNAPSHOT_MS: integer(20, 1000, 250),
  NEXUS_FIRST_WAVE_CALLS: integer(1, 10000, 2),
  NEXUS_FIRST_WAVE_WAIT_MS: integer(0, 600000, 30000),
  NEXUS_AUTH_CACHE_TTL_MS: integer(0, 5000, 1000),
  NEXUS_AUTH_CACHE_LISTENING_TTL_MS: integer(0, 600000, 60000),
  NEXUS_QUOTA_LEASE_IDLE_MS: integer(10, 60000, 1000),
  NEXUS_GATEWAY_ASYNC_COMMIT: flag(false),
  NEXUS_RECORD_WINDOW_MS: integer(5, 250, 5),
  NEXUS_REALTIME_IDLE_TIMEOUT_MS: integer(1000, undefined, 300_000),
  NEXUS_REALTIME_MAX_FRAME_BYTES: integer(1024, 1 << 30, 16 * 1024 * 1024),
  NEXUS_REALTIME_SESSIONS_PER_ACCESS: integer(1, undefined, 20),
  NEXUS_REALTIME_SESSIONS_PER_PROCESS: integer(1, undefined, 2000),
  NEXUS_COMMIT: z
    .string()
    .regex(/^[\x21-\x7E]{1,100}$/, { error: 'must be printable ASCII without spaces, at most 100 characters' })
    .optional(),
  NEXUS_STRIPE_API_BASE_URL: httpUrl.optional(),
  NEXUS_PADDLE_API_BASE_URL: httpUrl.optional(),
  NEXUS_BILLING_PAST_DUE_GRACE_HOURS: hours(72),
  NEXUS_WEBHOOK_SECRET_OVERLAP_HOURS: hours(24),
  NEXUS_EVENTS_RETRY_SCHEDULE_MS: z
    .string()
    .regex(/^\s*\d+(\s*,\s*\d+)*\s*$/, { error: 'must be a list of milliseconds separated by commas' })
    .default('0,5000,300000,1800000,7200000,18000000,36000000,36000000')
    .transform((v) => Object.freeze(v.split(',').map((ms) => Number(ms.trim())))),
  NEXUS_EVENTS_TIMEOUT_MS: integer(100, 60000, 15000),
  NEXUS_EVENTS_DISABLE_AFTER_HOURS: hours(120),
  NEXUS_EVENTS_POLL_MS: integer(10, 60000, 1000),
  NEXUS_EVENTS_CLAIM_MS: integer(100, 3600_000, 60000),
  NEXUS_EVENTS_SECRET_OVERLAP_HOURS: hours(24),
  NEXUS_EVENTS_KEY_EXPIRING_DAYS: integer(0, 365, 7),
  // OpenTelemetry traces (off unless an exporter or an endpoint is named), with the SDK's standard names.
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'console', 'none'], { error: 'must be one of otlp, console, none' }).optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_HEADERS: z
    .string()
    .regex(/^\s*[^=,\s]+\s*=[^,]*(,\s*[^=,\s]+\s*=[^,]*)*$/, { error: 'must be a list of name=value separated by commas' })
    .optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default('nexus'),
  OTEL_TRACES_SAMPLER: z
    .enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'], {
      error: 'must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
    })
    .default('parentbased_always_on'),
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number({ error: 'must be number' })
    .min(0, { error: 'must be >= 0' })
    .max(1, { error: 'must be <= 1' })
    .default(1),
  ...peopleVariables.shape,
  ...archiveVariables.shape,
});

/**
 * Where traces go, or undefined (off) when neither OTEL_TRACES_EXPORTER nor an OTLP endpoint is set, or
 * the exporter is `none`. The OTLP endpoint gets the traces path appended (/v1/traces), as the
 * OpenTelemetry specification says; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is taken as it is.
 */
function tracingOf(v: z.output<typeof variables>) {
  const exporter = v.OTEL_TRACES_EXPORTER ?? (v.OTEL_EXPORTER_OTLP_ENDPOINT || v.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? 'otlp' : 'none');
  if (exporter === 'none') return undefined;
  const base = (v.OTEL_EXPORTER_OTLP_ENDPOINT ?? 'http://localhost:4318').replace(/\/+$/, '');
  const headers: Record<string, string> = {};
  for (const pair of (v.OTEL_EXPORTER_OTLP_HEADERS ?? '').split(',')) {
    const at = pair.indexOf('=');
    if (at > 0) headers[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim());
  }
  return Object.freeze({
    exporter,
    /** Where OTLP/HTTP (JSON) spans are posted. */
    endpoint: v.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${base}/v1/traces`,
    /** Sent with each export (a collector's credentials): never logged. */
    headers: Object.freeze(headers),
    serviceName: v.OTEL_SERVICE_NAME,
    sampler: v.OTEL_TRACES_SAMPLER,
    samplerRatio: v.OTEL_TRACES_SAMPLER_ARG,
  });
}

/** The process: where it listens, its workers and data, how it logs, its requests' limits and its shutdown. */
function serverFields(v: z.output<typeof variables>) {
  return {
    nodeEnv: v.NODE_ENV,
    /** Where `npm start` listens (0: any free port). */
    port: v.PORT,
    host: v.HOST,
    /** Processes serving the port (node:cluster): 1 is this process alone; more need DATABASE_URL. */
    workers: v.NEXUS_WORKERS,
    dataDir: v.NEXUS_DATA_DIR,
    /** Where clients reach Nexus (gatewayBaseUrl, webhookUrl, Link headers), no trailing slash; undefined: the listen address. */
    publicUrl: v.NEXUS_PUBLIC_URL?.replace(/\/+$/, ''),
    /**
     * Whose Host and X-Forwarded-Host/-Proto name the public URL when NEXUS_PUBLIC_URL is unset: false (no one's,
     * the listen address is used), true (any peer's), or the ranges (`address/bits`) of the proxies whose
     * headers are believed; the connection's peer address is what is checked (src/http/public-url.ts).
     */
    trustProxy: v.NEXUS_TRUST_PROXY,
    logLevel: v.NEXUS_LOG_LEVEL,
    /** Largest accepted admin request body, bytes. */
    bodyLimitBytes: v.NEXUS_BODY_LIMIT_BYTES,
    /**
     * CSV exports (invocations, usage summaries) a process streams at once; one more is refused with 503
     * `exports_busy` and a Retry-After. A usage summary's export holds two of the Admin API pool's connections.
     */
    exportsAtOnce: v.NEXUS_EXPORTS_AT_ONCE,
    /** Bytes of the usage summaries' finished days a process keeps (src/domain/invocations/usage-days.ts); 0: none. */
    usageDayCacheBytes: v.NEXUS_USAGE_DAY_CACHE_MB * 1024 * 1024,
    /**
     * How long a request's body may take to arrive, from the request's start (node's requestTimeout): a client
     * trickling one is answered 408 and its connection closed, instead of holding its socket.
     */
    bodyTimeoutMs: v.NEXUS_BODY_TIMEOUT_MS,
    shutdownTimeoutMs: v.NEXUS_SHUTDOWN_TIMEOUT_MS,
    /**
     * The event loop held up longer than this is a stall: /healthz answers 503 `event_loop_blocked` for
     * twice as long after it, and the watchdog thread logs it while it lasts (src/observability/event-loop.ts).
     */
    eventLoopBlockedMs: v.NEXUS_EVENT_LOOP_BLOCKED_MS,
    /** The commit this build came from, for nexus_build_info; undefined: what the build recorded (src/observability/build-info.ts). */
    commit: v.NEXUS_COMMIT,
  };
}

/** The database: PostgreSQL (or the embedded PGlite), its schema, pools and LISTEN session, and how long a start waits for it. */
function databaseFields(v: z.output<typeof variables>) {
  return {
    /** PostgreSQL URL; undefined means the embedded PGlite in dataDir. */
    databaseUrl: v.DATABASE_URL,
    /**
     * Where the change listener holds its LISTEN session (src/db/change-listener.ts): a direct connection to
     * PostgreSQL when DATABASE_URL goes through a pooler in transaction mode; defaults to DATABASE_URL.
     */
    databaseListenUrl: v.NEXUS_DATABASE_LISTEN_URL ?? v.DATABASE_URL,
    /** PostgreSQL schema to use (tests give each file its own). */
    databaseSchema: v.NEXUS_DATABASE_SCHEMA,
    /**
     * Whether the gateway's hot statements are prepared by name on each connection (parsed and planned once).
     * false sends them unnamed: needed behind a pooler in transaction mode (PgBouncer before 1.21, or without
     * max_prepared_statements), where the next transaction may run on a connection that never saw the PREPARE.
     */
    databasePreparedStatements: v.NEXUS_DATABASE_PREPARED_STATEMENTS,
    /** Connections of each of a process's two PostgreSQL pools (the Admin API's and the gateway's), at most. */
    databasePoolMax: v.NEXUS_DATABASE_POOL_MAX,
    /** How long a gateway pool connection stays open unused (each one opened again plans its named statements anew). */
    gatewayPoolIdleMs: v.NEXUS_GATEWAY_POOL_IDLE_MS,
    /**
     * How long a start waits for a PostgreSQL it cannot reach (src/db/wait-for-database.ts), serving /healthz
     * meanwhile; past it, the process exits 1 with one line. 0: it exits at the first failed try.
     */
    databaseStartupTimeoutMs: v.NEXUS_DATABASE_STARTUP_TIMEOUT_MS,
  };
}

/** Keys: the root Management Key, the encryption keys of the secrets at rest, and the inference keys' lifetime and prefix. */
function keyFields(v: z.output<typeof variables>, warn: (msg: string) => void) {
  return {
    /** Root Management Key accepted as given; undefined: generated on first start. */
    managementKey: v.NEXUS_MANAGEMENT_KEY,
    /** Current 32-byte key for secrets at rest. */
    encryptionKey: v.NEXUS_ENCRYPTION_KEY
      ? decodeKey('NEXUS_ENCRYPTION_KEY', v.NEXUS_ENCRYPTION_KEY)
      : devEncryptionKey(v.NEXUS_DATA_DIR, warn),
    /** Older keys that still decrypt (rotation). */
    previousEncryptionKeys: (v.NEXUS_PREVIOUS_ENCRYPTION_KEYS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => decodeKey('NEXUS_PREVIOUS_ENCRYPTION_KEYS', s)) as readonly Buffer[],
    /** Lifetime of an inference key when the request names none. */
    inferenceKeyTtlDays: v.NEXUS_INFERENCE_KEY_TTL_DAYS,
    /** Environment word in inference key prefixes: nx-live-..., nx-test-... */
    keyEnvironment: v.NEXUS_KEY_ENVIRONMENT,
  };
}

/** The gateway: its upstreams, bodies and timeouts, its quota leases, the first wave, the key cache, its commits. */
function gatewayFields(v: z.output<typeof variables>) {
  return {
    allowPrivateUpstreams: v.NEXUS_ALLOW_PRIVATE_UPSTREAMS,
    /** Largest accepted gateway request body, bytes. */
    gatewayBodyLimitBytes: v.NEXUS_GATEWAY_BODY_LIMIT_BYTES,
    /** Upstream timeout before response headers, unless the connection sets one. */
    upstreamTimeoutMs: v.NEXUS_UPSTREAM_TIMEOUT_MS,
    /** Timeout of the provider connection test/verify probe. */
    providerProbeTimeoutMs: v.NEXUS_PROVIDER_PROBE_TIMEOUT_MS,
    /**
     * How long a gateway process's quota lease outlives its last heartbeat (five a TTL) before another
     * process may reclaim it: charge its calls in flight and return what it held.
     */
    leaseTtlMs: v.NEXUS_LEASE_TTL_MS ?? v.NEXUS_RESERVATION_TTL_MS ?? LEASE_TTL_MS,
    /**
     * How often a gateway process writes the calls under way that began answering or changed since its
     * last write (lease_calls): what a SIGKILL can take from a call's charge is what it streamed since.
     */
    callSnapshotMs: v.NEXUS_CALL_SNAPSHOT_MS,
    /**
     * JSON calls an access may have under way at once, on one process, to a connection's model that has not
     * answered one there yet (the first wave, bounded: docs/reliability.md "The first wave").
     */
    firstWaveCalls: v.NEXUS_FIRST_WAVE_CALLS,
    /** How long a call beyond them waits for the first answer (or a place) before it is refused 429 `first_wave_limited`. */
    firstWaveWaitMs: v.NEXUS_FIRST_WAVE_WAIT_MS,
    /** How long the gateway may trust a cached key lookup. */
    authCacheTtlMs: v.NEXUS_AUTH_CACHE_TTL_MS,
    /**
     * How long a cached lookup of a key with a current period may answer while the change listener vouches that it
     * has heard every change the other processes committed until authCacheTtlMs ago (60 s by default; at most
     * authCacheTtlMs: off). A listener whose session is not its own (through a transaction pooler) cannot vouch, and
     * its lookups keep authCacheTtlMs: NEXUS_DATABASE_LISTEN_URL gives it one behind a pooler.
     */
    authCacheListeningTtlMs: v.NEXUS_AUTH_CACHE_LISTENING_TTL_MS,
    /** A gateway quota lease unused this long returns its units to the period. */
    quotaLeaseIdleMs: v.NEXUS_QUOTA_LEASE_IDLE_MS,
    /**
     * Gateway writes (leases, settlements, records) commit without waiting for
     * the WAL flush: faster, but a PostgreSQL crash can lose the last moments of them.
     */
    gatewayAsyncCommit: v.NEXUS_GATEWAY_ASYNC_COMMIT,
    /**
     * The longest the recorder's group commit waits for more calls to end before their record statement (5 ms, one
     * slice, by default): a longer window shares a statement's fixed cost among more calls, and widens by as much
     * what a killed process's answered JSON calls can leave uncharged (docs/reliability.md).
     */
    recordWindowMs: v.NEXUS_RECORD_WINDOW_MS,
    /** Realtime sessions (docs/realtime.md): closed after this long without a frame or a pong; frames past the size closed 1009. */
    realtime: Object.freeze({
      idleTimeoutMs: v.NEXUS_REALTIME_IDLE_TIMEOUT_MS,
      maxFrameBytes: v.NEXUS_REALTIME_MAX_FRAME_BYTES,
      sessionsPerAccess: v.NEXUS_REALTIME_SESSIONS_PER_ACCESS,
      sessionsPerProcess: v.NEXUS_REALTIME_SESSIONS_PER_PROCESS,
    }),
  };
}

/** Billing (the providers' APIs, the grace of past_due, webhook secrets) and outbound events. */
function billingAndEventFields(v: z.output<typeof variables>) {
  return {
    stripeApiBaseUrl: v.NEXUS_STRIPE_API_BASE_URL,
    paddleApiBaseUrl: v.NEXUS_PADDLE_API_BASE_URL,
    /** How long past_due keeps an access ACTIVE. */
    billingPastDueGraceMs: v.NEXUS_BILLING_PAST_DUE_GRACE_HOURS,
    /** How long a rotated-out webhook secret stays valid. */
    webhookSecretOverlapMs: v.NEXUS_WEBHOOK_SECRET_OVERLAP_HOURS,
    /**
     * Outbound events (docs/events.md): the delay before each delivery attempt (the first is the first
     * attempt's, then one per retry; Svix's schedule by default), a receiver's time to answer, how long an
     * endpoint may fail without a success before it is disabled, how often the delivery workers look for due
     * messages, how long a claimed message is left to its process before another may send it, how long a
     * rotated-out endpoint secret still signs, and how long before its expiry a key raises inference_key.expiring.
     */
    eventsRetryScheduleMs: v.NEXUS_EVENTS_RETRY_SCHEDULE_MS,
    eventsTimeoutMs: v.NEXUS_EVENTS_TIMEOUT_MS,
    eventsDisableAfterMs: v.NEXUS_EVENTS_DISABLE_AFTER_HOURS,
    eventsPollMs: v.NEXUS_EVENTS_POLL_MS,
    eventsClaimMs: v.NEXUS_EVENTS_CLAIM_MS,
    eventsSecretOverlapMs: v.NEXUS_EVENTS_SECRET_OVERLAP_HOURS,
    eventsKeyExpiringDays: v.NEXUS_EVENTS_KEY_EXPIRING_DAYS,
  };
}

/**
 * What each variable becomes. `warn` tells of the development encryption key generated
 * when NEXUS_ENCRYPTION_KEY is unset, and of a deprecated variable's name.
 */
function fields(v: z.output<typeof variables>, warn: (msg: string) => void) {
  if (v.NEXUS_WORKERS > 1 && !v.DATABASE_URL) {
    throw new ConfigError(
      `NEXUS_WORKERS=${v.NEXUS_WORKERS} needs PostgreSQL (DATABASE_URL): the embedded database (PGlite) serves one process only. ` +
        'Unset NEXUS_WORKERS, or set DATABASE_URL.',
    );
  }
  if (v.NODE_ENV === 'production' && !v.NEXUS_ENCRYPTION_KEY) {
    throw new ConfigError('NEXUS_ENCRYPTION_KEY is required when NODE_ENV=production');
  }
  if (v.NEXUS_RESERVATION_TTL_MS !== undefined) {
    warn(
      v.NEXUS_LEASE_TTL_MS === undefined
        ? 'NEXUS_RESERVATION_TTL_MS is deprecated: rename it NEXUS_LEASE_TTL_MS (the old name goes in the next major release).'
        : 'NEXUS_RESERVATION_TTL_MS is deprecated and ignored: NEXUS_LEASE_TTL_MS is set.',
    );
  }
  return {
    ...serverFields(v),
    ...databaseFields(v),
    ...keyFields(v, warn),
    ...gatewayFields(v),
    ...billingAndEventFields(v),
    ...peopleFields(v),
    ...archiveFields(v),
    /** OpenTelemetry traces; undefined: off (no SDK loaded). */
    tracing: tracingOf(v),
  };
}

export type Config = Readonly<ReturnType<typeof fields>>;

/**
 * The dev-only fallback: a key generated once into the data dir. Written whole under another name and linked
 * into place, which fails if the file exists: of processes starting at once on a new data dir (the server and
 * the CLI, say) one writes the key and all read it. Written in place after a check, each could write its own
 * and go on with it, sealing secrets under a key the file no longer held.
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

/** Parses the environment once; the Config is frozen (tests build their own with loadConfig). */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  warn: (msg: string) => void = (msg) => console.warn(msg),
): Config {
  const set: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && value !== '') set[name] = value;
  const parsed = variables.safeParse(set);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'environment'} ${issue.message}`);
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
  }
  let config;
  try {
    config = fields(parsed.data, warn);
  } catch (err) {
    throw err instanceof PeopleConfigError || err instanceof ArchiveConfigError
      ? new ConfigError(`Invalid configuration: ${err.message}`)
      : err;
  }
  Object.freeze(config.previousEncryptionKeys);
  return Object.freeze(config);
}
