/**
 * Every background job of a Nexus process, started and stopped here: the app's start() (src/app.ts) starts them
 * once the database is reached and the gateway built, its close() stops them. Each round of a job is counted in
 * `nexus_job_runs_total{job,outcome}` and timed in `nexus_job_last_run_duration_seconds{job}`; a round that fails
 * logs a warning (its line below, with `job` and `error`) and the job goes on at its next round. A job runs one
 * round at a time: the next is due its interval after the last one ended.
 *
 * | job               | every                                     | claim (where processes compete)                        |
 * | ----------------- | ----------------------------------------- | ------------------------------------------------------ |
 * | lease-sweep       | NEXUS_LEASE_TTL_MS / 4 (at least 250 ms)  | quota_leases FOR UPDATE SKIP LOCKED; rate allowances   |
 * |                   |                                           | deleted past their expiry (a row goes once)            |
 * | access-expiry     | 60 s                                      | workspace_accesses FOR UPDATE SKIP LOCKED              |
 * | key-expiry        | 60 s                                      | inference_keys FOR UPDATE SKIP LOCKED, marked announced |
 * | idempotency-purge | 10 min                                    | none needed: batched deletes (a row goes once)         |
 * | webhook-delivery  | at once after a full round, else          | webhook_messages FOR UPDATE SKIP LOCKED, claimed for   |
 * |                   | NEXUS_EVENTS_POLL_MS                      | NEXUS_EVENTS_CLAIM_MS                                  |
 * | billing           | 30 s                                      | each webhook event by a conditional UPDATE to          |
 * |                   |                                           | PROCESSING; the time rules per access, under its lock  |
 * | spool-recovery    | once, at start                            | a spool file, by renaming it (spool.ts)                |
 * | history           | at start, then hourly                     | none needed: a month is made if missing (a race loses  |
 * |                   |                                           | its round, retried next hour); batches go once         |
 * | batch-settlement  | 5 s                                       | batches due FOR UPDATE SKIP LOCKED, their next poll    |
 * |                   |                                           | pushed past a 5 min claim (docs/batches.md)            |
 * | change-listener   | one LISTEN session, held; reconnects      | none: every process listens                            |
 * |                   | after 100 ms doubling to 5 s; pinged      |                                                        |
 * |                   | every 250 ms, lost after 5 s unanswered   |                                                        |
 *
 * Every process runs every job; where they compete for rows, the claim says how each row goes to one of them.
 * The change listener's runs are its sessions: `ok` when it listens (again), `failed` when an attempt fails or
 * the session is lost.
 *
 * Not here: the timers that keep one object's own state, started and stopped with it (gateway.close() stops
 * them): the quota leases' heartbeat and the calls' snapshot (call-meter.ts), the idle leases' and allowances'
 * return (quota-leases.ts, rate-allowances.ts), the recorder's spill, probe and search for other processes'
 * spool files (src/records/call-recorder.ts), the breakers' poll (route-registry.ts), the key cache's and upstream pools'
 * sweeps (auth-cache.ts, upstreams.ts); and the event loop's monitor (src/observability/event-loop.ts). The
 * usage rollups are no job: the statement that records a batch of calls adds them.
 */
import type { Config } from './config.js';
import { startChangeListener, type ChangeListener } from './db/change-listener.js';
import { isEmbedded, type Db } from './db/database.js';
import type { Services } from './domain/services.js';
import type { Batches } from './batches/batches.js';
import type { Gateway } from './gateway/gateway.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';

/** The jobs' names: the `job` label of their metrics and log lines. */
type JobName =
  | 'lease-sweep'
  | 'access-expiry'
  | 'key-expiry'
  | 'idempotency-purge'
  | 'request-log-sweep'
  | 'webhook-delivery'
  | 'billing'
  | 'spool-recovery'
  | 'history'
  | 'batch-settlement'
  | 'change-listener';

const MINUTE_MS = 60_000;
/** How often history's months ahead are made and its retention applied. */
const HISTORY_ROUND_MS = 60 * MINUTE_MS;
/** How often the open batches are looked at (each is polled when its own time comes: docs/batches.md). */
const BATCH_POLL_MS = 5_000;
/** How often the billing pass runs (pending events, grace expiry, period ends). */
const BILLING_PASS_MS = 30_000;

export interface JobsDeps {
  services: Services;
  gateway: Gateway;
  /** The Batch API (src/batches/): its settlement's rounds. */
  batches: Batches;
  db: Db;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** Whether the history job's rounds apply the retention (app.ts's `historyRetention` override; true in a process). */
  historyRetention: boolean;
}

/** A job that runs in rounds, one at a time. */
interface Loop<T> {
  name: JobName;
  /** The warning a failed round logs. */
  failure: string;
  run(): Promise<T>;
  /** From the start to the first round, ms. */
  first: number;
  /** From the end of a round (what it returned; undefined: it failed) to the next, ms. */
  next(result: T | undefined): number;
}

/** A loop under way: stop() ends it after the round under way, which settled() waits for. */
interface Running {
  stop(): void;
  settled(): Promise<void>;
}

const seconds = (since: number) => (performance.now() - since) / 1e3;

/** `run`, counted and timed as a round of `job`; its failure is counted and thrown on. */
async function timed<T>(metrics: Metrics, job: JobName, run: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    const result = await run();
    metrics.jobRun(job, 'ok', seconds(started));
    return result;
  } catch (err) {
    metrics.jobRun(job, 'failed', seconds(started));
    throw err;
  }
}

/** A round of a loop, counted and timed; a failure is logged, never thrown (undefined). */
async function round<T>({ metrics, logger }: JobsDeps, loop: Loop<T>): Promise<T | undefined> {
  try {
    return await timed(metrics, loop.name, () => loop.run());
  } catch (err) {
    logger.warn({ msg: loop.failure, job: loop.name, error: (err as Error).message });
    return undefined;
  }
}

function startLoop<T>(deps: JobsDeps, loop: Loop<T>): Running {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running = Promise.resolve();
  const schedule = (ms: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = round(deps, loop).then((result) => schedule(loop.next(result)));
    }, ms);
    timer.unref();
  };
  schedule(loop.first);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
    settled: () => running,
  };
}

const every = (ms: number) => ({ first: ms, next: () => ms });

/** The sweeps: rows whose time has come, each job a round every so often. */
function sweeps({ services, gateway, batches, config, logger, historyRetention }: JobsDeps): Loop<unknown>[] {
  return [
    {
      // A process that died holding quota leases: after their TTL, its calls in flight are charged and what they held returns.
      name: 'lease-sweep',
      ...every(Math.max(250, Math.floor(config.leaseTtlMs / 4))),
      failure: 'quota lease sweep failed',
      run: async () => {
        const reclaimed = await gateway.sweepExpired();
        if (reclaimed.leases) logger.info({ msg: 'reclaimed the quota leases of a process that stopped', ...reclaimed });
      },
    },
    {
      // Accesses whose accessEndsAt or last quota period has passed become EXPIRED (reads apply it lazily too).
      name: 'access-expiry',
      ...every(MINUTE_MS),
      failure: 'access expiry sweep failed',
      run: () => services.accesses.expireDue(),
    },
    {
      // Open batches whose poll is due: each asked of its provider, settled once it ended (docs/batches.md).
      name: 'batch-settlement',
      ...every(BATCH_POLL_MS),
      failure: 'batch settlement round failed',
      run: () => batches.settle(),
    },
    {
      // Idempotency rows past their 24 h window: their sealed answers (a key's plaintext, sometimes) go.
      name: 'idempotency-purge',
      ...every(10 * MINUTE_MS),
      failure: 'idempotency purge failed',
      run: () => services.idempotency.purgeExpired(),
    },
    {
      // Request logs past their policy's retention (docs/request-logs.md): removed in bounded batches.
      name: 'request-log-sweep',
      ...every(MINUTE_MS),
      failure: 'request log sweep failed',
      run: () => services.requestLogs.sweepExpired(),
    },
    {
      // The keys entering their last days: inference_key.expiring, once per key.
      name: 'key-expiry',
      ...every(MINUTE_MS),
      failure: 'inference key expiry announcement failed',
      run: () => services.inferenceKeyExpiry.announceExpiring(),
    },
    {
      // History (docs/operations.md): this month's partitions and the next ones made before they are needed, then
      // the retention: expired months dropped (archived first where configured), a shorter policy's rows in batches.
      name: 'history',
      first: 0,
      next: () => HISTORY_ROUND_MS,
      failure: 'history upkeep failed',
      run: async () => {
        const made = await services.history.ensureMonthsAhead();
        const round = historyRetention ? await services.history.applyRetention() : undefined;
        if (made.length || round?.dropped.length || round?.removed) logger.info({ msg: 'history upkeep', made, ...round });
      },
    },
  ];
}

/** Outbound events: this process's delivery worker (docs/events.md), a round at once after a full one. */
function deliveries({ services, config }: JobsDeps): Loop<number> {
  const delivery = services.webhookDelivery;
  return {
    name: 'webhook-delivery',
    failure: 'webhook delivery round failed',
    run: () => delivery.runOnce(),
    first: 0,
    next: (claimed) => (claimed === delivery.batch ? 0 : config.eventsPollMs),
  };
}

/** The other processes' changes (src/domain/changes/change-feed.ts); the embedded database has no other process. */
async function listen({ services, config, db, logger, metrics }: JobsDeps): Promise<ChangeListener | undefined> {
  const { channel } = services.changes;
  if (!channel || !config.databaseListenUrl || isEmbedded(db)) return undefined;
  const listener = startChangeListener({
    url: config.databaseListenUrl,
    channel,
    logger,
    onPayload: (payload) => services.changes.received(payload),
    onListening: () => {
      metrics.jobRun('change-listener', 'ok');
      services.changes.missed();
    },
    onFailure: () => {
      metrics.jobRun('change-listener', 'failed');
      services.changes.deaf();
    },
    // Pinged only where the key cache keeps entries past its TTL on the strength of what was heard.
    ...(config.authCacheListeningTtlMs > config.authCacheTtlMs ? { onHeard: (at: number) => services.changes.heard(at) } : {}),
  });
  await listener.ready;
  return listener;
}

export function createJobs(deps: JobsDeps) {
  const { services, gateway, metrics } = deps;
  let loops: Running[] = [];
  let delivering: Running | undefined;
  let stopBilling: (() => Promise<void>) | undefined;
  let listener: ChangeListener | undefined;
  return {
    /** Starts every job; resolves once the change listener has tried to listen (it retries on its own after). */
    async start(): Promise<void> {
      loops = sweeps(deps).map((loop) => startLoop(deps, loop));
      // Records a process that stopped left in the spool, while PostgreSQL was away (the recorder logs a failure).
      void timed(metrics, 'spool-recovery', () => gateway.recover());
      delivering = startLoop(deps, deliveries(deps));
      // Billing's pass runs on billing's timer, each pass counted here (billing logs a failure).
      stopBilling = services.billing.startBackground(BILLING_PASS_MS, (pass) => timed(metrics, 'billing', pass));
      listener = await listen(deps);
    },
    /**
     * Stops every job. The sweeps' rounds under way end on their own; the deliveries under way are cut (their
     * claims given back) and waited for, as are the billing pass and its inbox.
     */
    async stop(): Promise<void> {
      for (const loop of loops.splice(0)) loop.stop();
      const delivery = delivering;
      delivering = undefined;
      if (delivery) {
        delivery.stop();
        services.webhookDelivery.cut();
        await delivery.settled();
        await services.webhookDelivery.close();
      }
      const billing = stopBilling;
      stopBilling = undefined;
      await billing?.();
      await listener?.close();
    },
  };
}

export type Jobs = ReturnType<typeof createJobs>;
