/**
 * `npm run bench:console`: what the console's invocations and usage pages (and a connection's health) cost on a busy
 * workspace, against their target of 300 ms an answer. A fresh database gets BENCH_CONSOLE_INVOCATIONS (default 1,000,000) invocations in one
 * workspace over BENCH_CONSOLE_DAYS (default 30) days, made by generate_series as the gateway writes them: time-ordered
 * ids, BENCH_CONSOLE_USERS (default 2,000) end users with their emails, external ids and accesses, six models, 2%
 * refused and 1% failed upstream, a USAGE event for each charged call, each call's attempt on one connection, and the
 * hourly rollups the recording statements keep. A Nexus listens on it in this process, and each page the console
 * asks for (the first page, a search by request id, by email, by external id, a model prefix common and rare, a
 * user's refused calls, an invocation's detail; the usage page's summaries this month by model and by user, the last
 * 24 hours by hour, its CSV; the connection's health) is asked through HTTP
 * BENCH_CONSOLE_RUNS times (default 30, after 3 to warm up); it prints p50 and p99 (until the answer's last byte).
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): the server the fresh database is made on;
 * it is dropped at the end.
 */
import { cpus, loadavg } from 'node:os';
import pg from 'pg';
import { percentile, withFreshNexus } from './lib/fresh-nexus.js';

const INVOCATIONS = Number(process.env.BENCH_CONSOLE_INVOCATIONS ?? 1_000_000);
const USERS = Number(process.env.BENCH_CONSOLE_USERS ?? 2_000);
const DAYS = Number(process.env.BENCH_CONSOLE_DAYS ?? 30);
const RUNS = Number(process.env.BENCH_CONSOLE_RUNS ?? 30);
const TARGET_MS = 300;

/** What an answer holds: a list's items, a summary's buckets, a CSV's lines (less its header), else 1. */
function rowsOf(text: string): number {
  if (!text.startsWith('[') && !text.startsWith('{')) return text.trimEnd().split('\n').length - 1;
  const body = JSON.parse(text) as unknown;
  if (Array.isArray(body)) return body.length;
  const buckets = (body as { buckets?: unknown[] }).buckets;
  return buckets ? buckets.length : 1;
}

/**
 * The workspace's users, accesses, calls, usage events and rollups seeded on a connection of its own; resolves with an
 * invocation from the middle of the range (what the searches look for).
 */
async function seedCalls(
  databaseUrl: string,
  workspaceId: string,
  planId: string,
  connectionId: string,
): Promise<{ id: string; request_id: string }> {
  const until = new Date();
  const since = new Date(until.getTime() - DAYS * 86_400_000);
  const seedStarted = Date.now();
  const seed = new pg.Client({ connectionString: databaseUrl });
  await seed.connect();
  await seed.query(
    `insert into workspace_users (id, workspace_id, external_user_id, email, name, created_at)
     select ('00000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid, $1, 'user-' || n, 'user' || n || '@example.com',
            'User ' || n, now()
       from generate_series(0, $2 - 1) as n`,
    [workspaceId, USERS],
  );
  await seed.query(
    `insert into workspace_accesses (id, workspace_id, user_id, plan_id, status, access_starts_at, created_at, updated_at)
     select ('00000000-0000-4000-9000-' || lpad(n::text, 12, '0'))::uuid, $1, ('00000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
            $3, 'ACTIVE', now() - interval '90 days', now(), now()
       from generate_series(0, $2 - 1) as n`,
    [workspaceId, USERS, planId],
  );
  // Ids as the gateway mints them (UUID v7: the start's milliseconds first), so id order is time order.
  await seed.query(
    `create temporary table bench_calls as
       select (substr(lpad(to_hex(ms), 12, '0'), 1, 8) || '-' || substr(lpad(to_hex(ms), 12, '0'), 9, 4) || '-7' || substr(h, 1, 3)
               || '-8' || substr(h, 4, 3) || '-' || substr(h, 7, 12))::uuid as id, gen_random_uuid() as usage_id, at, n,
              ('00000000-0000-4000-9000-' || lpad((n % $4)::text, 12, '0'))::uuid as access_id,
              ('00000000-0000-4000-b000-' || lpad((n % $4)::text, 12, '0'))::uuid as key_id,
              (array['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'claude-sonnet-4-5', 'claude-haiku-4-5', 'o3-mini'])[1 + (n % 6)] as model,
              case when abs(hashint4(n) % 100) < 2 then 'REJECTED' when abs(hashint4(n) % 100) = 2 then 'UPSTREAM_ERROR' else 'SUCCEEDED' end as status,
              (n % 500) + 20 as input_tokens, (n % 300) + 5 as output_tokens
         from (select n, at, (extract(epoch from at) * 1000)::bigint as ms, md5(n::text) as h
                 from (select n, $2::timestamptz + ((n::double precision / $1) * ($3::timestamptz - $2::timestamptz)) as at
                         from generate_series(0, $1 - 1) as n) t) s`,
    [INVOCATIONS, since, until, USERS],
  );
  await seed.query(
    `insert into invocations (id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, request_id,
                              method, endpoint, requested_model, status, metering_status, quota_units, error_code, error_message,
                              started_at, completed_at, total_latency_ms, attempt_id, attempt_upstream_model, attempt_status,
                              attempt_http_status, attempt_started_at, attempt_first_token_at, attempt_completed_at, attempt_duration_ms)
     select id, $1, access_id, $2, key_id, gen_random_uuid()::text, 'POST',
            'v1/chat/completions', model, status, 'metered',
            case when status = 'SUCCEEDED' then input_tokens + 2 * output_tokens else 0 end,
            case status when 'REJECTED' then 'quota_insufficient' when 'UPSTREAM_ERROR' then null end,
            case status when 'REJECTED' then 'The access has no quota left' when 'UPSTREAM_ERROR' then 'The server had an error' end,
            at, at + interval '800 milliseconds', 800,
            -- A refused call reached no provider: no attempt.
            case when status <> 'REJECTED' then usage_id end, case when status <> 'REJECTED' then model end,
            case status when 'SUCCEEDED' then 'SUCCEEDED' when 'UPSTREAM_ERROR' then 'UPSTREAM_ERROR' end,
            case status when 'SUCCEEDED' then 200 when 'UPSTREAM_ERROR' then 500 end,
            case when status <> 'REJECTED' then at + interval '5 milliseconds' end,
            case when status = 'SUCCEEDED' then at + make_interval(secs => (100 + n % 400) / 1000.0) end,
            case when status <> 'REJECTED' then at + interval '790 milliseconds' end,
            case when status <> 'REJECTED' then 600 + n % 400 end
       from bench_calls`,
    [workspaceId, connectionId],
  );
  await seed.query(
    `insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, invocation_id, kind, units,
                               input_tokens, cached_input_tokens, output_tokens, model, created_at)
     select usage_id, $1, access_id, gen_random_uuid(), id, 'USAGE', input_tokens + 2 * output_tokens,
            input_tokens, 0, output_tokens, model, at
       from bench_calls where status = 'SUCCEEDED'`,
    [workspaceId],
  );
  // The hourly sums the recording statements keep (rollup-sql.ts): what the usage page reads.
  await seed.query(
    `insert into usage_rollups
   select $1, date_bin('1 hour', at, timestamptz '2000-01-01T00:00:00Z'), access_id, model, $2, key_id::text, $3,
          sum(case when status = 'SUCCEEDED' then input_tokens + 2 * output_tokens else 0 end),
          sum(case when status = 'SUCCEEDED' then input_tokens else 0 end), 0,
          sum(case when status = 'SUCCEEDED' then output_tokens else 0 end),
          count(*) filter (where status = 'SUCCEEDED'), 0, count(*) filter (where status = 'SUCCEEDED'),
          count(*), count(*) filter (where status = 'UPSTREAM_ERROR'), count(*) filter (where status = 'REJECTED')
     from bench_calls group by 2, 3, 4, 6`,
    [workspaceId, connectionId, planId],
  );
  await seed.query(
    `insert into usage_key_rollups
   select workspace_id, hour, workspace_access_id, inference_key_id, sum(units), sum(input_tokens), sum(cached_input_tokens),
          sum(output_tokens), sum(events), sum(cost_micros), sum(unpriced_events), sum(calls), sum(failed_calls), sum(refused_calls)
     from usage_rollups where workspace_id = $1 group by 1, 2, 3, 4`,
    [workspaceId],
  );
  for (const table of ['invocations', 'usage_events', 'workspace_users', 'workspace_accesses', 'usage_rollups', 'usage_key_rollups']) {
    await seed.query(`vacuum analyze ${table}`);
  }
  // What the searches look for: a request id and an invocation id from the middle of the range.
  const middle = (
    await seed.query(`select id, request_id from invocations where workspace_id = $1 order by id offset $2 limit 1`, [
      workspaceId,
      Math.floor(INVOCATIONS / 2),
    ])
  ).rows[0] as { id: string; request_id: string };
  await seed.end();
  console.log(
    `seeded ${INVOCATIONS.toLocaleString('en')} invocations of ${USERS.toLocaleString('en')} users over ${DAYS} days in ${((Date.now() - seedStarted) / 1000).toFixed(1)} s\n`,
  );
  return middle;
}

await withFreshNexus(
  'console',
  async ({ url: serverUrl, databaseUrl, headers }) => {
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${serverUrl}/admin/v1${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
      if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string };
    };
    const workspaceId = (await post('/workspaces', { name: 'bench-console' })).id;
    const planId = (await post(`/workspaces/${workspaceId}/plans`, { key: 'bench', name: 'Bench', billingInterval: 'MONTH' })).id;
    // The connection the calls were made on (never called: the rows are seeded; a closed local port, allowed below).
    const connectionId = (
      await post(`/workspaces/${workspaceId}/provider-connections`, {
        name: 'bench upstream',
        protocolProfile: 'openai',
        baseUrl: 'http://127.0.0.1:9',
        apiKey: 'sk-bench-0123456789abcdefghijklmnopqrstuvwxyz',
      })
    ).id;

    const middle = await seedCalls(databaseUrl, workspaceId, planId, connectionId);

    const list = `/admin/v1/workspaces/${workspaceId}/invocations`;
    // The usage page's asks: this month from its first midnight (UTC here), or the last 24 hours.
    const now = new Date();
    const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
    const summary = (range: 'month' | '24h', granularity: 'day' | 'hour', groupBy: string, suffix = '') => {
      const since = range === 'month' ? monthStart : new Date(now.getTime() - 86_400_000).toISOString();
      const query = new URLSearchParams({ since, until: now.toISOString(), granularity, groupBy, timeZone: 'UTC' });
      return `/admin/v1/workspaces/${workspaceId}/usage-summary${suffix}?${query}`;
    };
    const pages: [string, string][] = [
      ['first page', `${list}?limit=20`],
      ['by request id', `${list}?q=${middle.request_id}`],
      ['by invocation id', `${list}?q=${middle.id}`],
      ['by email (any case)', `${list}?q=${encodeURIComponent(`USER${Math.floor(USERS * 0.6)}@example.com`)}`],
      ['by external id', `${list}?q=user-77`],
      ['by model prefix, common (gpt-4o)', `${list}?model=gpt-4o`],
      ['by model prefix, none matches', `${list}?model=mistral`],
      ['a user, refused calls', `${list}?q=user-77&status=REJECTED`],
      ['first page, refused calls', `${list}?status=REJECTED`],
      ['detail (getInvocation)', `/admin/v1/invocations/${middle.id}`],
      ['usage: this month by model, by day', summary('month', 'day', 'model')],
      ['usage: this month by user, by day', summary('month', 'day', 'access')],
      ['usage: last 24 hours by model, by hour', summary('24h', 'hour', 'model')],
      ['usage: this month by user, CSV', summary('month', 'day', 'access', '/export')],
      ['connection health (5 min, hour, day)', `/admin/v1/provider-connections/${connectionId}/health`],
    ];
    // The figures scale with how busy the host is: say it.
    console.log(
      `host: ${cpus().length} CPUs, load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} (1, 5, 15 min)\n`,
    );
    console.log(`${'page'.padEnd(40)} ${'rows'.padStart(5)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)}  target ${TARGET_MS} ms`);
    let missed = 0;
    for (const [label, path] of pages) {
      const times: number[] = [];
      let rows = 0;
      for (let i = 0; i < RUNS + 3; i++) {
        const started = performance.now();
        const res = await fetch(`${serverUrl}${path}`, { headers });
        const text = await res.text();
        const took = performance.now() - started;
        if (res.status !== 200) throw new Error(`${label}: ${res.status} ${text}`);
        if (i >= 3) times.push(took);
        rows = rowsOf(text);
      }
      times.sort((a, b) => a - b);
      const p99 = percentile(times, 99);
      if (p99 > TARGET_MS) missed++;
      console.log(
        `${label.padEnd(40)} ${String(rows).padStart(5)} ${percentile(times, 50).toFixed(1).padStart(8)} ${p99.toFixed(1).padStart(8)}  ${p99 <= TARGET_MS ? 'ok' : 'OVER'}`,
      );
    }
    console.log(missed ? `\n${missed} page(s) over ${TARGET_MS} ms at p99` : `\nevery page within ${TARGET_MS} ms at p99`);
    process.exitCode = missed ? 1 : 0;
  },
  { NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true' },
);
