/**
 * History's tables are partitioned by month (migrations/20261210010000_history_partitions.ts):
 * - the migration converts a database with rows in every table without losing one, each row in its month, those past
 *   the months it makes in the default partition;
 * - a month made later takes the rows its default caught (nexus_history_month), and the history job keeps months ahead;
 * - the Admin API's reads with a time range touch only the months of that range: their plans (EXPLAIN) are shown.
 *
 * On its own schema, migrated up to the migration before, seeded as that version left rows, then migrated.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../../src/db/database.js';
import { migrateLatest } from '../../src/db/migrate.js';
import { createAuditRepo } from '../../src/domain/audit/audit-repo.js';
import { ensureMonth, HISTORY_TABLES, monthPartitions, type HistoryTable } from '../../src/domain/history/history-repo.js';
import { createHistoryService } from '../../src/domain/history/history-service.js';
import { createInvocationRepo } from '../../src/domain/invocations/invocation-repo.js';
import { createAuditService } from '../../src/domain/audit/audit-service.js';
import { newId } from '../../src/ids.js';
import { runSchemaPrefix } from '../support/test-db.js';

const BEFORE = '20261208110000_people_invitations';
const url = process.env.TEST_DATABASE_URL;
const schema = `${runSchemaPrefix()}${randomBytes(6).toString('hex')}`;
let db: Db;

const workspaceId = '00000000-0000-4000-8000-000000000001';
const now = new Date();
/** The first instant of the UTC month `n` months from now's. */
const month = (n: number) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + n, 1));
const midMonth = (n: number) => new Date(month(n).getTime() + 10 * 86_400_000);
/** Months of the seeded rows, from now's: 14 months ago to past what the migration makes (1 ahead). */
const SEEDED = [-14, -2, -1, 0, 5];
const PER_MONTH = 3;

function invocation(at: Date) {
  return {
    id: newId(),
    workspace_id: workspaceId,
    workspace_access_id: newId(),
    provider_connection_id: newId(),
    inference_key_id: newId(),
    request_id: `req_${newId()}`,
    method: 'POST',
    endpoint: '/v1/chat/completions',
    status: 'SUCCEEDED',
    metering_status: 'metered',
    started_at: at,
  };
}

async function seedOldSchema(): Promise<void> {
  await db('workspaces').insert({ id: workspaceId, name: 'history', status: 'ACTIVE', created_at: now, updated_at: now });
  for (const m of SEEDED) {
    for (let i = 0; i < PER_MONTH; i++) {
      const at = new Date(midMonth(m).getTime() + i * 3_600_000);
      const inv = invocation(at);
      await db('invocations').insert(inv);
      await db('usage_events').insert({
        id: newId(),
        workspace_id: workspaceId,
        workspace_access_id: inv.workspace_access_id,
        quota_period_id: newId(),
        invocation_id: inv.id,
        kind: 'USAGE',
        units: 10,
        created_at: at,
      });
      await db('webhook_attempts').insert({
        id: newId(),
        event_id: newId(),
        endpoint_id: newId(),
        workspace_id: workspaceId,
        outcome: 'DELIVERED',
        latency_ms: 5,
        created_at: at,
      });
      await db('audit_logs').insert({
        id: newId(),
        workspace_id: workspaceId,
        actor_key_id: 'root',
        action: 'workspace.updated',
        resource_type: 'workspace',
        resource_id: workspaceId,
        created_at: at,
      });
    }
  }
}

const count = async (table: string) => Number((await db(table).count<{ count: string }[]>('* as count'))[0]!.count);

/** The partitions a statement's plan reads (EXPLAIN, its relations under the partitioned table). */
async function partitionsRead(sql: string, bindings: readonly unknown[], table: HistoryTable): Promise<string[]> {
  // knex reports the statement with PostgreSQL's $n placeholders, in order: back to its own ? for db.raw.
  const statement = sql.replace(/\$\d+/g, '?');
  const { rows } = await db.raw<{ rows: { 'QUERY PLAN': unknown }[] }>(`explain (format json) ${statement}`, bindings as Knex.RawBinding[]);
  const names = new Set<string>();
  const walk = (node: Record<string, unknown>) => {
    const rel = node['Relation Name'];
    if (typeof rel === 'string' && rel.startsWith(`${table}_`)) names.add(rel);
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
  };
  walk((rows[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
  return [...names].sort();
}

/** The statements `read` sends, with their bindings. */
async function statementsOf(read: () => Promise<unknown>): Promise<{ sql: string; bindings: readonly unknown[] }[]> {
  const seen: { sql: string; bindings: readonly unknown[] }[] = [];
  const listener = (q: { sql: string; bindings: readonly unknown[] }) => seen.push({ sql: q.sql, bindings: q.bindings });
  db.on('query', listener);
  try {
    await read();
  } finally {
    db.off('query', listener);
  }
  return seen;
}

const monthName = (table: string, n: number) => `${table}_p${month(n).toISOString().slice(0, 7).replace('-', '')}`;

beforeAll(async () => {
  if (!url) return;
  db = createDatabase({ databaseUrl: url, schema, poolMax: 2 });
  await migrateLatest(db, schema, BEFORE);
  await seedOldSchema();
});
afterAll(async () => {
  if (!db) return;
  await db.raw('drop schema if exists ?? cascade', [schema]);
  await db.destroy();
});

describe.skipIf(!url)('history partitions', () => {
  it('converts every table without losing a row, each row in its month and those past the months made in the default', async () => {
    const before = Object.fromEntries(await Promise.all(Object.keys(HISTORY_TABLES).map(async (t) => [t, await count(t)])));
    expect(before.invocations).toBe(SEEDED.length * PER_MONTH);
    const started = performance.now();
    await migrateLatest(db, schema);
    console.log(`converted ${4 * SEEDED.length * PER_MONTH} rows in ${Math.round(performance.now() - started)} ms`);
    for (const [table, key] of Object.entries(HISTORY_TABLES)) {
      expect(await count(table), table).toBe(before[table]);
      const months = (await monthPartitions(db, table as HistoryTable)).map((m) => m.name);
      // From the oldest row's month through the one after the current one: 14 + 1 + 1.
      expect(months).toHaveLength(16);
      expect(months[0]).toBe(monthName(table, -14));
      for (const m of [-14, -2, -1, 0]) expect(await count(monthName(table, m)), `${table} ${m}`).toBe(PER_MONTH);
      // Five months ahead: no month yet, its rows in the default partition.
      expect(await count(`${table}_default`)).toBe(PER_MONTH);
      const inDefault = await db(`${table}_default`).min<{ min: Date }[]>(`${key} as min`);
      expect(inDefault[0]!.min.getTime()).toBeGreaterThanOrEqual(month(5).getTime());
    }
  });

  it('keeps the append-only rule: usage events and audit logs refuse an update or a delete, in every month', async () => {
    await expect(db('usage_events').update({ units: 11 })).rejects.toThrow(/append-only/);
    await expect(db('audit_logs').where('created_at', '<', month(-10)).delete()).rejects.toThrow(/append-only/);
    await expect(db.raw('truncate audit_logs')).rejects.toThrow(/append-only/);
  });

  it('a month made later takes the rows its default caught; the history job keeps this month and three ahead', async () => {
    for (const table of Object.keys(HISTORY_TABLES) as HistoryTable[]) {
      expect(await ensureMonth(db, table, midMonth(5))).toBe(true);
      expect(await ensureMonth(db, table, midMonth(5))).toBe(false);
      expect(await count(monthName(table, 5))).toBe(PER_MONTH);
      expect(await count(`${table}_default`)).toBe(0);
      expect(await count(table)).toBe(SEEDED.length * PER_MONTH);
    }
    const clock = { now: () => month(4) };
    const history = createHistoryService({ db, audit: createAuditService({ auditRepo: createAuditRepo(db), clock }), clock });
    const made = await history.ensureMonthsAhead();
    // Months 4 to 7 of each table: 5 exists (made above), 4, 6 and 7 are made.
    expect(made).toHaveLength(4 * 3);
    expect((await monthPartitions(db, 'invocations')).map((m) => m.name)).toContain(monthName('invocations', 7));
  });

  it('reads with a time range touch only the months of the range', async () => {
    const range = { since: month(-2), until: month(-1) };
    const invocations = createInvocationRepo(db);
    const audit = createAuditRepo(db);
    const reads: [HistoryTable, () => Promise<unknown>][] = [
      ['invocations', () => invocations.list({ workspaceId, ...range })],
      ['usage_events', () => invocations.listUsageEvents({ workspaceId, ...range })],
      ['audit_logs', () => audit.list({ workspaceId, ...range })],
    ];
    for (const [table, read] of reads) {
      const [statement] = (await statementsOf(read)).filter((s) => s.sql.includes(`"${table}"`));
      const partitions = await partitionsRead(statement!.sql, statement!.bindings, table);
      console.log(`${table} in [${range.since.toISOString()}, ${range.until.toISOString()}): reads ${partitions.join(', ')}`);
      expect(partitions).toEqual([monthName(table, -2)]);
    }
    // The page's events are read from its first start on: the month before it is not read.
    const page = await invocations.list({ workspaceId, since: month(-1), until: month(1) });
    const [details] = (await statementsOf(() => invocations.detailsOf(page.items))).filter((s) => s.sql.includes('"usage_events"'));
    const partitions = await partitionsRead(details!.sql, details!.bindings, 'usage_events');
    expect(partitions).not.toContain(monthName('usage_events', -2));
    expect(partitions).toContain(monthName('usage_events', -1));
  });
});
