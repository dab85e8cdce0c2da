/**
 * One process at a time on an embedded (PGlite) data directory. PGlite takes no
 * lock of its own: a second process (the CLI while the server runs, a second
 * `npm start`) opened the same files, and the last one to write overwrote the
 * other's changes (a management key made by the CLI vanished). The lock is a
 * pid file created exclusively, removed when the process exits; one left by a
 * process that is gone (killed, crashed) is taken over, and so is one of this
 * very process (it may open its database again).
 *
 * The file holds the pid and, where /proc tells it, the process's start time: a
 * pid left by a crash is soon another process's (after a reboot, or in a
 * container, where pids repeat from one start to the next), and a live process
 * that did not start when the holder did is not the holder: a start is not refused
 * for good because an unrelated process got the crashed one's pid.
 */
import { openSync, readFileSync, unlinkSync, writeSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../config.js';

const LOCK_FILE = 'nexus.pid';

/** Whether a process of this id runs on this host (the lock's holder, a spool file's writer). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** When the process started (clock ticks since boot, from /proc), or undefined where that cannot be read. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the command name (in parentheses, which may hold spaces): state is field 3, starttime field 22.
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return start && /^\d+$/.test(start) ? start : undefined;
  } catch {
    return undefined;
  }
}

/** True when the process the lock file names still runs (the same process: same pid and, where known, start time). */
function holds(pid: number, started: string | undefined): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return false;
  if (started === undefined) return true;
  const now = startTime(pid);
  return now === undefined || now === started;
}

/** Takes the directory's lock until this process exits, or throws a ConfigError naming the process that holds it. */
export function lockDataDir(dir: string): void {
  const file = join(dir, LOCK_FILE);
  const own = String(process.pid);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx');
      const started = startTime(process.pid);
      writeSync(fd, started ? `${own} ${started}` : own);
      closeSync(fd);
      process.once('exit', () => {
        try {
          if (readFileSync(file, 'utf8').trim().split(' ')[0] === own) unlinkSync(file);
        } catch {
          // already gone
        }
      });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const [pid, started] = readFileSync(file, 'utf8').trim().split(' ');
      const holder = Number(pid);
      const held = holds(holder, started);
      if (held && holder === process.pid) return;
      if (held) {
        throw new ConfigError(
          `The embedded database in ${dir} is in use by another Nexus process (pid ${holder}). ` +
            'Stop it first, or point both at PostgreSQL with DATABASE_URL (which any number of processes can share).',
        );
      }
      unlinkSync(file);
    }
  }
  throw new ConfigError(`Could not lock the embedded database in ${dir}`);
}
