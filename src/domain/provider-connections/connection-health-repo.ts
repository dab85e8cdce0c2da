/**
 * The figures of getProviderConnectionHealth, read from the invocations the gateway recorded: every attempt that
 * reached the connection's provider, direct or through a route, over the last day, summed for each window.
 *
 * Two index scans bounded by time, never a scan of the workspace's calls: the answering attempts by
 * (provider_connection_id, started_at) (invocations_connection_started), and a route's earlier attempts by
 * (route_id, started_at) over the workspace's routes (invocations_route_started). An invocation starts before its
 * attempts, so its start bounds theirs; a table partitioned by started_at reads only the day's partitions.
 */
import type { Queryable } from '../../db/database.js';

export type HealthWindow = '5m' | '1h' | '1d';

export const WINDOWS: { window: HealthWindow; ms: number }[] = [
  { window: '5m', ms: 5 * 60_000 },
  { window: '1h', ms: 3_600_000 },
  { window: '1d', ms: 86_400_000 },
];

export interface WindowFigures {
  window: HealthWindow;
  attempts: number;
  errors: number;
  /** Milliseconds: p50, p95, p99 of the attempts' durations (null without attempts). */
  latency: [number, number, number] | null;
  /** Milliseconds from the request sent to the first byte, of the attempts that had one (null: none did). */
  ttft: [number, number, number] | null;
}

const ATTEMPTS = `
  select attempt_started_at as at, attempt_status as st, attempt_duration_ms::float8 as ms,
         extract(epoch from attempt_first_token_at - attempt_started_at) * 1000 as ttft
    from invocations
   where provider_connection_id = :connection and started_at >= :since and attempt_id is not null
  union all
  select (e->>'startedAt')::timestamptz, e->>'status', (e->>'durationMs')::float8, null
    from invocations i cross join lateral jsonb_array_elements(i.attempts) e
   where i.route_id = any(:routes) and i.started_at >= :since and i.attempts is not null
     and e->>'providerConnectionId' = :connectionText`;

/** The connection's attempts in each window ending at `now`: counts, errors, and latency percentiles. */
export async function windowFigures(q: Queryable, workspaceId: string, connectionId: string, now: Date): Promise<WindowFigures[]> {
  const routes: { id: string }[] = await q('routes').select('id').where({ workspace_id: workspaceId });
  const edges = Object.fromEntries(WINDOWS.map((w) => [`since_${w.window}`, new Date(now.getTime() - w.ms)]));
  const { rows } = await q.raw<{ rows: RawFigures[] }>(
    `with a as (${ATTEMPTS})
     select w.name as window, count(a.at)::int as attempts,
            count(a.at) filter (where a.st in ('UPSTREAM_ERROR', 'FAILED'))::int as errors,
            percentile_cont(array[0.5, 0.95, 0.99]) within group (order by a.ms) as latency,
            percentile_cont(array[0.5, 0.95, 0.99]) within group (order by a.ttft) as ttft
       from (values ('5m', :since_5m::timestamptz), ('1h', :since_1h::timestamptz), ('1d', :since_1d::timestamptz)) w(name, since)
       left join a on a.at >= w.since and a.at <= :now
      group by w.name`,
    {
      ...edges,
      since: edges.since_1d,
      now,
      connection: connectionId,
      connectionText: connectionId,
      routes: q.raw('?::uuid[]', [routes.map((r) => r.id)]),
    },
  );
  const byWindow = new Map(rows.map((r) => [r.window, r]));
  return WINDOWS.map(({ window }) => {
    const r = byWindow.get(window);
    return {
      window,
      attempts: r?.attempts ?? 0,
      errors: r?.errors ?? 0,
      latency: percentiles(r?.latency),
      ttft: percentiles(r?.ttft),
    };
  });
}

interface RawFigures {
  window: HealthWindow;
  attempts: number;
  errors: number;
  latency: (number | null)[] | null;
  ttft: (number | null)[] | null;
}

function percentiles(values: (number | null)[] | null | undefined): [number, number, number] | null {
  if (!values || values.some((v) => v === null)) return null;
  const [p50, p95, p99] = values as number[];
  return [p50!, p95!, p99!];
}
