/**
 * The embedded database (PGlite, no DATABASE_URL) runs in the server's own thread, and its statements
 * resolve without I/O. These tests run on it on purpose, whatever database the suite uses: a loop of
 * statements on it must let timers, requests and signal handlers run, and a delete must count its rows
 * (a purge that counted a result object as rows never ended, and held the event loop at 100% CPU).
 * Each test is bounded by its own count of statements: a loop that never yields cannot be stopped by
 * vitest's timeout (a timer), so it is stopped by throwing.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../../src/db/database.js';
import { migrateLatest } from '../../src/db/migrate.js';
import { createIdempotencyRepo } from '../../src/domain/idempotency/idempotency-repo.js';
import { createIdempotencyService } from '../../src/domain/idempotency/idempotency-service.js';
import { createKeyHasher, IDEMPOTENCY_HASH_LABEL } from '../../src/domain/security/key-hash.js';
import { createSecretBox } from '../../src/domain/security/secret-box.js';

const DAY_MS = 24 * 3600 * 1000;
let db: Db;

beforeAll(async () => {
  db = createDatabase({ databaseUrl: undefined });
  await migrateLatest(db);
});

afterAll(async () => {
  await db.destroy();
});

function claimRow(key: string, createdAt: Date) {
  return {
    principal_id: 'principal',
    idempotency_key: key,
    method: 'POST',
    path: '/v1/workspaces',
    request_hash: 'h',
    created_at: createdAt,
  };
}

describe('the embedded database', () => {
  it('answers a delete with the number of rows it deleted', async () => {
    await db('idempotency_keys').insert([claimRow('d-1', new Date(0)), claimRow('d-2', new Date(0)), claimRow('d-3', new Date())]);
    const deleted: unknown = await db('idempotency_keys').where('created_at', '<', new Date(1000)).delete();
    expect(deleted).toBe(2);
    expect(await db('idempotency_keys').where('idempotency_key', 'like', 'd-%').delete()).toBe(1);
  });

  it('lets timers run between the statements of a loop', async () => {
    let fired = false;
    setTimeout(() => (fired = true), 0);
    let statements = 0;
    while (!fired && statements < 200) {
      await db.raw('select 1');
      statements++;
    }
    expect(fired).toBe(true);
    expect(statements).toBeLessThan(200);
  });

  it('purges the idempotency rows past the window batch by batch, and the purge ends', async () => {
    const now = new Date();
    const old = new Date(now.getTime() - DAY_MS - 60_000);
    await db('idempotency_keys').insert([1, 2, 3, 4, 5].map((i) => claimRow(`old-${i}`, old)));
    await db('idempotency_keys').insert(claimRow('recent', now));
    const repo = createIdempotencyRepo(db);
    let statements = 0;
    const key = randomBytes(32);
    const idempotency = createIdempotencyService({
      // The real repository, counted: a purge of five rows in batches of two takes three statements.
      idempotencyRepo: {
        ...repo,
        deleteOlderThan: (before, limit) => {
          if (++statements > 10) throw new Error('purgeExpired did not stop');
          return repo.deleteOlderThan(before, limit);
        },
      },
      clock: { now: () => now },
      secretBox: createSecretBox(key, []),
      requestHasher: createKeyHasher(key, IDEMPOTENCY_HASH_LABEL),
    });
    expect(await idempotency.purgeExpired(2)).toBe(5);
    expect(statements).toBe(3);
    expect((await db('idempotency_keys').select('idempotency_key')).map((r: { idempotency_key: string }) => r.idempotency_key)).toEqual([
      'recent',
    ]);
  });
});
