/**
 * The gateway's spool (src/records/spool.ts) on a real directory: which files a
 * running process takes for left by its host's dead processes (foreign()), and
 * that its replay claims and writes them, once, leaving the files of live ones.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CallRows } from '../../src/records/call-rows.js';
import { createSpool } from '../../src/records/spool.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const LIVE = 1001;
const DEAD = 1002;
const ME = 1000;

function spoolDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'nexus-spool-'));
  dirs.push(dir);
  return dir;
}

const record = (id: string) => `{"id":"${id}","invocation":{"id":"${id}"},"leaseCall":null}\n`;
const spoolOf = (dir: string) => createSpool(dir, { host: 'web1', pid: ME, isAlive: (pid) => pid === ME || pid === LIVE });

describe('the spool of a running process', () => {
  it('sees nothing foreign in a missing or empty directory, nor in files of live processes, its own, or another host', async () => {
    const dir = spoolDir();
    expect(await spoolOf(join(dir, 'missing')).foreign()).toBe(false);
    expect(await spoolOf(dir).foreign()).toBe(false);
    writeFileSync(join(dir, `calls-web1-${LIVE}-17000000000000001.jsonl`), record('a'));
    writeFileSync(join(dir, `calls-web1-${ME}-17000000000000001.jsonl`), record('b'));
    writeFileSync(join(dir, `calls-web2-${DEAD}-17000000000000001.jsonl`), record('c'));
    writeFileSync(join(dir, 'notes.txt'), 'not a spool file');
    expect(await spoolOf(dir).foreign()).toBe(false);
  });

  it("finds a dead process's file (left as calls- or as a replay cut short), and its replay writes it once and removes it", async () => {
    for (const kind of ['calls', 'replay']) {
      const dir = spoolDir();
      writeFileSync(join(dir, `${kind}-web1-${DEAD}-17000000000000001.jsonl`), record('x') + record('y'));
      writeFileSync(join(dir, `calls-web1-${LIVE}-17000000000000001.jsonl`), record('z'));
      const spool = spoolOf(dir);
      expect(await spool.foreign()).toBe(true);
      const written: CallRows[] = [];
      expect(await spool.replay(async (rows) => void written.push(...rows))).toBe(2);
      expect(written.map((r) => r.id)).toEqual(['x', 'y']);
      expect(await spool.foreign()).toBe(false);
      // The live process's file stays where it was.
      expect(readdirSync(dir)).toEqual([`calls-web1-${LIVE}-17000000000000001.jsonl`]);
    }
  });

  it('replays the rows it appended as they were, and the JSON objects of a version before as the same rows', async () => {
    const dir = spoolDir();
    const spool = spoolOf(dir);
    const rows: CallRows = { id: 'a', invocation: '"(a,\\"x y\\",)"', leaseCall: null };
    await spool.append([rows]);
    writeFileSync(
      join(dir, `calls-web1-${DEAD}-17000000000000001.jsonl`),
      '{"id":"b","invocation":{"id":"b","request_id":"r 1","streamed":false,"quota_units":"300","attempts":null},' +
        '"leaseCall":{"lease_id":"l","bound":"10","charged":true,"model":"gpt-4o"}}\n',
    );
    const written: CallRows[] = [];
    expect(await spool.replay(async (batch) => void written.push(...batch))).toBe(2);
    const invocation = `"(b,,,,,\\"r 1\\",,,,,,,false,,300${','.repeat(26)})"`;
    expect(written).toEqual([rows, { id: 'b', invocation, leaseCall: `"(l,10,,,true,,,,,,,gpt-4o${','.repeat(16)})"` }]);
  });
});
