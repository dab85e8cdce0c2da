import type { Knex } from 'knex';

/**
 * Money (docs/pricing.md, "Cost"): what the providers charge the operator, apart from the units an end user's plan
 * is charged.
 *
 * - `workspaces.currency`: the ISO 4217 code the workspace's prices, costs and budgets are in (default USD).
 * - `model_prices`: the price book, versioned. A price covers a model pattern on one connection, on every connection
 *   of one protocol, or on every connection, from `effective_from` to `effective_to` (open: in force until closed).
 *   Prices per million tokens are `numeric` (exact decimals). The service refuses overlapping ranges of one pattern
 *   and scope (the workspace row is locked while it checks: no extension needed, so PGlite has it too).
 * - `usage_events.cost_micros` and `price_id`: the call's cost in integer millionths of the currency under the price
 *   in force when the call started, computed by the statement that writes the event (settlement-sql.ts). Null: no
 *   price matched. Events are append-only, so a cost once written never changes.
 * - `usage_rollups.cost_micros` and `unpriced_events`, kept by the same trigger as the units.
 * - `workspace_budgets`: a daily or monthly spend budget, its soft and hard levels, and the window in which each
 *   level was last crossed.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`alter table workspaces add column currency text not null default 'USD' check (currency ~ '^[A-Z]{3}$')`);
  await knex.raw(`
    create table model_prices (
      id uuid primary key,
      workspace_id uuid not null references workspaces(id),
      provider_connection_id uuid,
      protocol_profile text,
      model_pattern text not null,
      -- The pattern as a LIKE pattern ('*' is '%', '%', '_' and '\\' escaped), null for an exact name.
      model_like text,
      currency text not null,
      input_per_million numeric not null check (input_per_million >= 0),
      cached_input_per_million numeric check (cached_input_per_million >= 0),
      cache_write_per_million numeric check (cache_write_per_million >= 0),
      output_per_million numeric not null check (output_per_million >= 0),
      reasoning_per_million numeric check (reasoning_per_million >= 0),
      effective_from timestamptz not null,
      effective_to timestamptz check (effective_to is null or effective_to > effective_from),
      source text not null default 'manual',
      created_at timestamptz not null default now(),
      check (provider_connection_id is null or protocol_profile is null)
    )`);
  await knex.raw('create index model_prices_lookup on model_prices (workspace_id, effective_from)');
  await knex.raw('alter table usage_events add column cost_micros bigint, add column price_id uuid');
  await knex.raw(
    'alter table usage_rollups add column cost_micros bigint not null default 0, add column unpriced_events bigint not null default 0',
  );
  await knex.raw(`
    create or replace function nexus_roll_up_usage() returns trigger language plpgsql as $$
    begin
      insert into usage_rollups as r
      select n.workspace_id, date_bin('1 hour', n.created_at, timestamptz '2000-01-01T00:00:00Z'), n.workspace_access_id, coalesce(n.model, ''),
             coalesce(i.provider_connection_id::text, ''), sum(n.units), sum(n.input_tokens), sum(n.cached_input_tokens),
             sum(n.output_tokens), count(*), coalesce(sum(n.cost_micros), 0),
             count(*) filter (where n.kind = 'USAGE' and n.price_id is null)
        from new_events n left join invocations i on i.id = n.invocation_id
       group by 1, 2, 3, 4, 5
       order by 1, 2, 3, 4, 5
      on conflict (workspace_id, hour, workspace_access_id, model, provider_connection_id) do update
         set units = r.units + excluded.units, input_tokens = r.input_tokens + excluded.input_tokens,
             cached_input_tokens = r.cached_input_tokens + excluded.cached_input_tokens,
             output_tokens = r.output_tokens + excluded.output_tokens, events = r.events + excluded.events,
             cost_micros = r.cost_micros + excluded.cost_micros, unpriced_events = r.unpriced_events + excluded.unpriced_events;
      return null;
    end $$`);
  // The events written before: none had a price.
  await knex.raw(`
    update usage_rollups r set unpriced_events = t.n
      from (select workspace_id, date_bin('1 hour', created_at, timestamptz '2000-01-01T00:00:00Z') as hour, workspace_access_id,
                   coalesce(model, '') as model, count(*) as n
              from usage_events where kind = 'USAGE' group by 1, 2, 3, 4) t
     where r.workspace_id = t.workspace_id and r.hour = t.hour and r.workspace_access_id = t.workspace_access_id and r.model = t.model`);
  await knex.raw(`
    create table workspace_budgets (
      workspace_id uuid primary key references workspaces(id),
      period text not null check (period in ('DAY', 'MONTH')),
      soft_micros bigint check (soft_micros >= 0),
      hard_micros bigint check (hard_micros >= 0),
      -- The start of the window in which each level was crossed (null: not crossed in any window yet).
      soft_crossed_window timestamptz,
      hard_crossed_window timestamptz,
      -- While now is before it, the hard level is crossed: new metered calls are refused.
      hard_exceeded_until timestamptz,
      updated_at timestamptz not null default now()
    )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop table workspace_budgets');
  await knex.raw(`
    create or replace function nexus_roll_up_usage() returns trigger language plpgsql as $$
    begin
      insert into usage_rollups as r
      select n.workspace_id, date_bin('1 hour', n.created_at, timestamptz '2000-01-01T00:00:00Z'), n.workspace_access_id, coalesce(n.model, ''),
             coalesce(i.provider_connection_id::text, ''), sum(n.units), sum(n.input_tokens), sum(n.cached_input_tokens),
             sum(n.output_tokens), count(*)
        from new_events n left join invocations i on i.id = n.invocation_id
       group by 1, 2, 3, 4, 5
       order by 1, 2, 3, 4, 5
      on conflict (workspace_id, hour, workspace_access_id, model, provider_connection_id) do update
         set units = r.units + excluded.units, input_tokens = r.input_tokens + excluded.input_tokens,
             cached_input_tokens = r.cached_input_tokens + excluded.cached_input_tokens,
             output_tokens = r.output_tokens + excluded.output_tokens, events = r.events + excluded.events;
      return null;
    end $$`);
  await knex.raw('alter table usage_rollups drop column cost_micros, drop column unpriced_events');
  await knex.raw('alter table usage_events drop column cost_micros, drop column price_id');
  await knex.raw('drop table model_prices');
  await knex.raw('alter table workspaces drop column currency');
}
