/**
 * A large workspace's usage as the gateway writes it, for the scripts that time what reads it (bench-usage.ts,
 * bench-export.ts): `events` usage events spread evenly over [since, until), each with its invocation, made by
 * generate_series, 20 accesses with 2 inference keys each, 3 plans, 5 models and 3 connections; one call in 25
 * failed, one in 50 refused (no event); the events carry a cost under a price (one model's none: unpriced), cache
 * writes and reasoning tokens on some. The usage rollup is computed from them (src/domain/recording/rollup-sql.ts).
 */
import pg from 'pg';
import { rebuildWorkspaceRollupsSql } from '../../src/domain/recording/rollup-sql.js';

/** Seeds the workspace's usage on `databaseUrl`; usage_rollups' rows after. */
export async function seedUsage(
  databaseUrl: string,
  workspaceId: string,
  { events, since, until }: { events: number; since: Date; until: Date },
): Promise<number> {
  const seed = new pg.Client({ connectionString: databaseUrl });
  await seed.connect();
  // Keys, accesses, plans, models and connections as ids and names the rows cycle through (a key belongs to one
  // access, an access is on one plan); the gateway's rows carry no foreign key to them.
  await seed.query(
    `create temporary table bench_calls as
         select gen_random_uuid() as invocation_id, gen_random_uuid() as usage_id,
                ('00000000-0000-4000-8000-' || lpad((n % 20)::text, 12, '0'))::uuid as access_id,
                ('00000000-0000-4000-a000-' || lpad((n % 40)::text, 12, '0'))::uuid as key_id,
                ('00000000-0000-4000-b000-' || lpad((n % 20 % 3)::text, 12, '0'))::uuid as plan_id,
                ('00000000-0000-4000-9000-' || lpad((n % 3)::text, 12, '0'))::uuid as connection_id,
                'model-' || (n % 5) as model, n % 5 as model_n,
                case when n % 50 = 7 then 'REJECTED' when n % 25 = 3 then 'FAILED' else 'SUCCEEDED' end as status,
                $2::timestamptz + ((n::double precision / $1) * ($3::timestamptz - $2::timestamptz)) as at,
                (n % 500) + 20 as input_tokens, (n % 300) + 5 as output_tokens,
                case when n % 7 = 0 then 10 end as cache_write_tokens,
                case when n % 5 = 3 then ((n % 300) + 5) / 2 end as reasoning_tokens
           from generate_series(0, $1 - 1) as n`,
    [events, since, until],
  );
  await seed.query(
    `insert into invocations (id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, plan_id, request_id,
                                method, endpoint, requested_model, status, metering_status, quota_units, started_at, completed_at)
       select invocation_id, $1, access_id, connection_id, key_id, plan_id, 'req_' || invocation_id, 'POST', '/v1/chat/completions',
              model, status, 'metered', case when status = 'REJECTED' then 0 else input_tokens + 2 * output_tokens end, at, at
         from bench_calls`,
    [workspaceId],
  );
  // A refused call has no event. The cost: 2.50 input, 10 output per million, 3.75 a cache write, 10 reasoning;
  // model-4 has no price.
  await seed.query(
    `insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, invocation_id, kind, units,
                                 input_tokens, cached_input_tokens, output_tokens, model, created_at, cost_micros, price_id,
                                 cache_write_tokens, reasoning_tokens)
       select usage_id, $1, access_id, gen_random_uuid(), invocation_id, 'USAGE', input_tokens + 2 * output_tokens,
              input_tokens, 0, output_tokens, model, at,
              case when model_n < 4 then round((input_tokens - coalesce(cache_write_tokens, 0)) * 2.5
                                               + coalesce(cache_write_tokens, 0) * 3.75 + output_tokens * 10)::bigint end,
              case when model_n < 4 then '00000000-0000-4000-c000-000000000001'::uuid end,
              cache_write_tokens, reasoning_tokens
         from bench_calls where status <> 'REJECTED'`,
    [workspaceId],
  );
  // Analyzed before the rollup is computed from them: without their statistics, on 200,000 events, the planner chose
  // a plan that spilled to disk for ten minutes.
  await seed.query('vacuum analyze invocations');
  await seed.query('vacuum analyze usage_events');
  await seed.query(rebuildWorkspaceRollupsSql('$1'), [workspaceId]);
  await seed.query('vacuum analyze usage_rollups');
  const rollups = (await seed.query('select count(*)::int as n from usage_rollups')).rows[0] as { n: number };
  await seed.end();
  return rollups.n;
}
