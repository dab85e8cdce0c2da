/**
 * Every provider key a test creates contains SECRET_MARKER, so the scans can
 * prove that no response body and no log line ever carried one: this file's
 * scanner runs in test/security/secret-scan.test.ts (its own records and those
 * written so far) and in the global teardown (every record of the run).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SECRET_MARKER = 'sk-nexus-test-SECRET';

/** The per-run records the harness writes: log lines and JSON response bodies, per worker pid. */
export function recordFiles(dir: string, pid?: number): string[] {
  if (!existsSync(dir)) return [];
  const pattern = pid === undefined ? /^(logs|responses)-\d+\.log$/ : new RegExp(`^(logs|responses)-${pid}\\.log$`);
  return readdirSync(dir)
    .filter((f) => pattern.test(f))
    .map((f) => join(dir, f));
}

/** `file:line` of every record holding the marker (the line itself is not repeated: it holds a secret). */
export function findSecretLeaks(files: string[], marker = SECRET_MARKER): string[] {
  const leaks: string[] = [];
  for (const file of files) {
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (line.includes(marker)) leaks.push(`${file}:${i + 1}`);
    });
  }
  return leaks;
}
