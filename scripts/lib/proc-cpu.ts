/**
 * A process's CPU time from Linux's /proc, for the benches that report CPU per call or per answer: the process's own
 * figure, whatever else the host runs.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Linux's USER_HZ: /proc reports CPU time in hundredths of a second. */
const TICKS_PER_SECOND = 100;

export interface CpuTime {
  user: number;
  system: number;
}

/** The CPU seconds (user, system) process `pid` has used so far; throws if it is gone or there is no /proc. */
export function cpuTimeOf(pid: number): CpuTime {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // After the command's name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) / TICKS_PER_SECOND, system: Number(fields[12]) / TICKS_PER_SECOND };
}

/** The CPU seconds, user and system together, process `pid` has used so far. */
export function cpuSecondsOf(pid: number): number {
  const { user, system } = cpuTimeOf(pid);
  return user + system;
}

/**
 * The CPU nanoseconds process `pid` has used so far, all its threads together, from the scheduler's own count
 * (/proc/<pid>/task/<tid>/schedstat: nanoseconds, where /proc/<pid>/stat counts hundredths of a second); the
 * ticks of `cpuTimeOf` without schedstat. Throws if the process is gone or there is no /proc.
 */
export function cpuNanosOf(pid: number): number {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    tasks = [];
  }
  let ns = 0;
  try {
    for (const tid of tasks) ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    // a thread that ended while read, or no schedstat: the ticks instead
    ns = 0;
  }
  if (ns > 0) return ns;
  const { user, system } = cpuTimeOf(pid);
  return (user + system) * 1e9;
}

/** The resident set of process `pid` now, in MiB (/proc/<pid>/status VmRSS); undefined if it is gone or there is no /proc. */
export function rssMbOf(pid: number): number | undefined {
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) / 1024;
  } catch {
    return undefined;
  }
}
