/**
 * One process at a time on an embedded (PGlite) data directory. PGlite takes no
 * lock of its own: a second process (the CLI while the server runs, a second
 * `npm start`) opened the same files, and the last one to write overwrote the
 * other's changes (a management key made by the CLI vanished). The lock is a
 * pid file created exclusively, removed when the process exits; one left by a
 * process that is gone (killed, crashed) is taken over, and so is one of this
 * very process (it may open its database again).
 */
import { openSync, readFileSync, unlinkSync, writeSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../config.js';

const LOCK_FILE = 'nexus.pid';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the directory's lock until this process exits, or throws a ConfigError naming the process that holds it. */
export function lockDataDir(dir: string): void {
  const file = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      process.once('exit', () => {
        try {
          if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file);
        } catch {
          // already gone
        }
      });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(readFileSync(file, 'utf8').trim());
      if (holder === process.pid) return;
      if (Number.isInteger(holder) && holder > 0 && alive(holder)) {
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
