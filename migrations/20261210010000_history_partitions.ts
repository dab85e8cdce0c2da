import type { Knex } from 'knex';

/**
 * History partitioned by month (docs/operations.md, "History: partitions, retention, archive"): the four tables every
 * call or change appends to become range-partitioned on their time column, so expired history leaves by dropping a
 * month's partitions instead of a DELETE on a hot table, and a read with a time range touches only its months.
 *
 * | table            | partition key | primary key         |
 * | ---------------- | ------------- | ------------------- |
 * | invocations      | started_at    | (id, started_at)    |
 * | usage_events     | created_at    | (id, created_at)    |
 * | webhook_attempts | created_at    | (id, created_at)    |
 * | audit_logs       | created_at    | (id, created_at)    |
 *
 * (A call's attempts are a JSON column of its invocation, so they move with it.)
 *
 * A unique index of a partitioned table must hold its partition key, so each gains it: a call's row is recorded
 * with the times the call carries, the same on every replay (the spool, the reclaim), so `on conflict (id,
 * started_at)` still finds a row recorded before, and `(invocation_id, kind, created_at)` still refuses a second
 * event of a call. Each table has a DEFAULT partition, so an insert never fails for want of a month; the jobs create
 * the months ahead of need (`nexus_history_month`, which also moves into a new month the rows its default caught).
 *
 * The conversion copies each table into its months (a rewrite, with its indexes rebuilt, under an exclusive lock:
 * docs/operations.md gives its cost per million rows). The append-only rule stays, as triggers on the parent that
 * every partition inherits; `nexus_forbid_mutation` now lets a DELETE through where the transaction says
 * `nexus.history_delete = on`: the retention's bounded batches (src/domain/history/) and the move out of a default.
 */
interface Table {
  name: string;
  key: string;
  /** Its indexes, created on the parent (each partition gets its own). */
  indexes: string[];
  /** Its triggers and foreign keys, added after the copy. */
  after: string[];
}

const TABLES: Table[] = [
  {
    name: 'invocations',
    key: 'started_at',
    indexes: [
      'create index invocations_model_prefix_index on invocations (workspace_id, requested_model text_pattern_ops, id)',
      'create index invocations_route_started on invocations (route_id, started_at) where route_id is not null',
      'create index invocations_upstream_response on invocations (workspace_id, upstream_response_id) where upstream_response_id is not null',
      'create index invocations_workspace_access_id_id_index on invocations (workspace_access_id, id)',
      'create index invocations_workspace_id_id_index on invocations (workspace_id, id)',
      'create index invocations_workspace_id_status_id_index on invocations (workspace_id, status, id)',
      'create index invocations_workspace_request_id_index on invocations (workspace_id, request_id)',
    ],
    after: [],
  },
  {
    name: 'usage_events',
    key: 'created_at',
    indexes: [
      `create index usage_events_adjustments on usage_events (workspace_id, id) where kind = 'ADJUSTMENT'`,
      'create unique index usage_events_one_per_invocation on usage_events (invocation_id, kind, created_at)',
      `create unique index usage_events_one_usage_per_lease on usage_events (lease_id, created_at)
         where kind = 'USAGE' and lease_id is not null and invocation_id is null`,
      'create index usage_events_workspace_access_id_id_index on usage_events (workspace_access_id, id)',
      'create index usage_events_workspace_id_id_index on usage_events (workspace_id, id)',
    ],
    after: [
      `create trigger usage_events_append_only before update or delete on usage_events
         for each row execute function nexus_forbid_mutation()`,
    ],
  },
  {
    name: 'webhook_attempts',
    key: 'created_at',
    indexes: ['create index webhook_attempts_endpoint_id_event_id_index on webhook_attempts (endpoint_id, event_id)'],
    after: [],
  },
  {
    name: 'audit_logs',
    key: 'created_at',
    indexes: ['create index audit_logs_workspace_id_id_index on audit_logs (workspace_id, id)'],
    after: [
      `create trigger audit_logs_append_only before update or delete on audit_logs
         for each row execute function nexus_forbid_mutation()`,
      `create trigger audit_logs_no_truncate before truncate on audit_logs
         for each statement execute function nexus_forbid_mutation()`,
      'alter table audit_logs add constraint audit_logs_workspace_id_foreign foreign key (workspace_id) references workspaces (id)',
    ],
  },
];

/**
 * How many months past the current one the migration creates: one, so a database is never short of next month's
 * even before a process starts; the history job, at every start and hourly, makes the rest of its months ahead.
 */
const MONTHS_AHEAD = 1;

async function partition(knex: Knex, t: Table): Promise<void> {
  const old = `${t.name}_unpartitioned`;
  await knex.raw(`alter table ?? rename to ??`, [t.name, old]);
  await knex.raw(`create table ?? (like ?? including defaults including constraints) partition by range (??)`, [t.name, old, t.key]);
  await knex.raw(`create table ?? partition of ?? default`, [`${t.name}_default`, t.name]);
  // The months the rows span, through MONTHS_AHEAD past the current one.
  await knex.raw(
    `select nexus_history_month(?, m at time zone 'UTC')
       from generate_series(
              date_trunc('month', least(coalesce((select min(??) from ??), now()), now()) at time zone 'UTC'),
              date_trunc('month', now() at time zone 'UTC') + make_interval(months => ?),
              interval '1 month') m`,
    [t.name, t.key, old, MONTHS_AHEAD],
  );
  await knex.raw(`insert into ?? select * from ??`, [t.name, old]);
  await knex.raw(`drop table ??`, [old]);
  await knex.raw(`alter table ?? add primary key (id, ??)`, [t.name, t.key]);
  for (const sql of [...t.indexes, ...t.after]) await knex.raw(sql);
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create or replace function nexus_forbid_mutation() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' and current_setting('nexus.history_delete', true) = 'on' then
        return old;
      end if;
      raise exception 'table % is append-only', tg_table_name using errcode = '42501';
    end $$`);
  // The month of \`at\` (UTC) as a partition of \`parent\`, named parent_pYYYYMM, unless it exists; rows of that month
  // its default partition holds move into it first (a partition cannot be created over rows the default holds).
  await knex.raw(`
    create or replace function nexus_history_month(parent text, at timestamptz) returns boolean language plpgsql as $$
    declare
      lo timestamptz := date_trunc('month', at at time zone 'UTC') at time zone 'UTC';
      hi timestamptz := (date_trunc('month', at at time zone 'UTC') + interval '1 month') at time zone 'UTC';
      name text := parent || '_p' || to_char(lo at time zone 'UTC', 'YYYYMM');
      keycol text;
      held boolean;
    begin
      if to_regclass(name) is not null then
        return false;
      end if;
      select a.attname into keycol
        from pg_partitioned_table p join pg_attribute a on a.attrelid = p.partrelid and a.attnum = p.partattrs[0]
       where p.partrelid = to_regclass(parent);
      execute format('select exists (select 1 from %I where %I >= $1 and %I < $2)', parent || '_default', keycol, keycol)
        into held using lo, hi;
      if held then
        perform set_config('nexus.history_delete', 'on', true);
        execute format('create temporary table nexus_moved (like %I) on commit drop', parent);
        execute format('with moved as (delete from %I where %I >= $1 and %I < $2 returning *) insert into nexus_moved select * from moved',
                       parent || '_default', keycol, keycol) using lo, hi;
        perform set_config('nexus.history_delete', 'off', true);
      end if;
      execute format('create table %I partition of %I for values from (%L) to (%L)', name, parent, lo, hi);
      if held then
        execute format('insert into %I select * from nexus_moved', parent);
        drop table nexus_moved;
      end if;
      return true;
    end $$`);
  for (const t of TABLES) await partition(knex, t);
}

export async function down(knex: Knex): Promise<void> {
  for (const t of TABLES) {
    const flat = `${t.name}_flat`;
    await knex.raw(`create table ?? (like ?? including defaults including constraints)`, [flat, t.name]);
    await knex.raw(`insert into ?? select * from ??`, [flat, t.name]);
    await knex.raw(`drop table ?? cascade`, [t.name]);
    await knex.raw(`alter table ?? rename to ??`, [flat, t.name]);
    await knex.raw(`alter table ?? add primary key (id)`, [t.name]);
    for (const sql of [...t.indexes, ...t.after]) {
      await knex.raw(sql.replace(', created_at)', ')').replace('(invocation_id, kind, created_at)', '(invocation_id, kind)'));
    }
  }
  await knex.raw('drop function nexus_history_month(text, timestamptz)');
  await knex.raw(`
    create or replace function nexus_forbid_mutation() returns trigger language plpgsql as $$
    begin
      raise exception 'table % is append-only', tg_table_name using errcode = '42501';
    end $$`);
}
