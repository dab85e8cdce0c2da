/**
 * A process's CPU time from Linux's /proc, for the benches that report CPU per call or per answer: the process's own
 * figure, whatever else the host runs.
 */
import { readFileSync } from 'node:fs';

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
