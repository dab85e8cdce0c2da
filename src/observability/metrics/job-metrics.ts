/**
 * The background jobs (src/jobs.ts): each round of each job by outcome, and how long its last round took.
 * `job` is one of the jobs' names, a closed set.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** How a job's round ended: `failed` rounds log a warning naming the job. */
export type JobOutcome = 'ok' | 'failed';

export function createJobMetrics(registers: Registry[]) {
  const runs = new Counter({
    name: 'nexus_job_runs_total',
    help: 'Rounds of the background jobs (lease sweep, deliveries, billing...), by job and outcome (ok, failed)',
    labelNames: ['job', 'outcome'] as const,
    registers,
  });
  const lastDuration = new Gauge({
    name: 'nexus_job_last_run_duration_seconds',
    help: 'How long the last round of each background job took, by job',
    labelNames: ['job'] as const,
    registers,
  });
  return {
    /** A round of `job` ended (`seconds`: how long it took, when it is a round that is timed). */
    jobRun(job: string, outcome: JobOutcome, seconds?: number): void {
      runs.inc({ job, outcome });
      if (seconds !== undefined) lastDuration.set({ job }, seconds);
    },
  };
}
