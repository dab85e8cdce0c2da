/**
 * Recording and quota: the recorder's batches, failures and spool (src/records/call-recorder.ts), and the gateway's quota lease
 * statements (quota-leases.ts).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** What the recorder reports (src/records/call-recorder.ts RecorderStats). */
interface RecorderGauges {
  queued: number;
  spooled: number;
  outage: boolean;
}

/** The statements a quota lease runs (quota-leases.ts). */
type LeaseStatement = 'acquire' | 'extend' | 'renew' | 'release';

/** Why a batch of records was not written as one statement (src/records/call-recorder.ts). */
export type RecorderFailure = 'unavailable' | 'refused' | 'given_up';

/** The recorder's gauges, read at each scrape from `stats` (once the recorder is watched). */
function recorderGauges(registers: Registry[], stats: () => RecorderGauges | undefined): void {
  const gauge = (name: string, help: string, read: (s: RecorderGauges) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const s = stats();
        if (s) this.set(read(s));
      },
    });
  gauge('nexus_recorder_queue_depth', 'Call records waiting in memory to be written', (s) => s.queued);
  gauge('nexus_recorder_spooled_records', "Call records waiting in this process's spool files for the database", (s) => s.spooled);
  gauge('nexus_recorder_database_away', 'Whether the recorder takes the database to be away (1) or not (0)', (s) => (s.outage ? 1 : 0));
}

export function createRecorderMetrics(registers: Registry[]) {
  const leaseStatements = new Counter({
    name: 'nexus_quota_lease_statements_total',
    help: "The gateway's quota lease statements by kind (acquire, extend, renew, release): its database round trips outside the calls' records",
    labelNames: ['kind'] as const,
    registers,
  });
  const batchSize = new Histogram({
    name: 'nexus_recorder_batch_size',
    help: 'Call records written per statement (group commit)',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200],
    registers,
  });
  const recorderFailures = new Counter({
    name: 'nexus_recorder_failures_total',
    help: 'Record writes that failed, by kind: unavailable (the database is away: the records wait), refused (a batch refused, its records retried one by one), given_up (a record the database refuses: the call goes uncharged)',
    labelNames: ['kind'] as const,
    registers,
  });
  const requestLogs = new Counter({
    name: 'nexus_request_logs_total',
    help: 'Request logs by outcome: written, dropped_pressure (too many waiting to be written), dropped_failed (their batch failed, or the database was away at shutdown)',
    labelNames: ['outcome'] as const,
    registers,
  });
  const spooledTotal = new Counter({
    name: 'nexus_recorder_spooled_records_total',
    help: 'Call records written to the spool while the database was away',
    registers,
  });
  let recorderStats: (() => RecorderGauges) | undefined;
  recorderGauges(registers, () => recorderStats?.());
  return {
    leaseStatement(kind: LeaseStatement) {
      leaseStatements.inc({ kind });
    },
    /** Recorder events (src/records/call-recorder.ts). */
    recorderBatch(size: number): void {
      batchSize.observe(size);
    },
    recorderFailure(kind: RecorderFailure): void {
      recorderFailures.inc({ kind });
    },
    recorderSpooled(records: number): void {
      spooledTotal.inc(records);
    },
    requestLogsWritten(count: number): void {
      requestLogs.inc({ outcome: 'written' }, count);
    },
    requestLogsDropped(reason: 'pressure' | 'failed', count: number): void {
      requestLogs.inc({ outcome: `dropped_${reason}` }, count);
    },
    /** Where the recorder's queue and spool gauges are read at each scrape. */
    watchRecorder(stats: () => RecorderGauges): void {
      recorderStats = stats;
    },
  };
}
