/**
 * The figures of getProviderConnectionHealth and of each target in getRouteHealth, read from the invocations the
 * gateway recorded: every attempt that reached a connection's provider, direct or through a route (for a route's
 * target, through that route only), over the last day, summed for each window.
 *
 * Two index scans bounded by time, never a scan of the workspace's calls: the answering attempts by
 * (provider_connection_id, started_at) (invocations_connection_started), and a route's earlier attempts by
 * (route_id, started_at) over the workspace's routes (invocations_route_started). An invocation starts before its
 * attempts, so its start bounds theirs; a table partitioned by started_at reads only the day's partitions.
 */
import type { Queryable } from '../../db/database.js';

type HealthWindow = '5m' | '1h' | '1d';

const WINDOWS: { window: HealthWindow; ms: number }[] = [
  { window: '5m', ms: 5 * 60_000 },
  { window: '1h', ms: 3_600_000 },
  { window: '1d', ms: 86_400_000 },
];

export interface WindowFigures {
  window: HealthWindow;
  /** The window's start (it ends at the time asked). */
  since: Date;
  attempts: number;
  errors: number;
  /** Milliseconds: p50, p95, p99 of the attempts' durations (null without attempts). */
  latency: [number, number, number] | null;
  /** Milliseconds from the request sent to the first byte, of the attempts that had one (null: none did). */
  ttft: [number, number, number] | null;
}

/**
 * Whose attempts: connections' over every call of their workspace (`workspaceId`: direct, and through any of its
 * routes), or a route's targets' through that route alone (`routeId`).
 */
export type AttemptScope = { connectionIds: string[] } & ({ workspaceId: string } | { routeId: string });

/**
 * An attempt's time to first token in milliseconds, as float8: the value `extract(epoch from first - start) * 1000`
 * (numeric) casts to, without numeric arithmetic and its conversion through text for each row (16-20% of the
 * statement's CPU). Within a day either way the difference `d` is a number of microseconds `t` alone (no day part),
 * and `date_part('epoch', d * 1000)` is `(t * 1000) / 1e6` in float8, one rounding of an exact quotient: the float8
 * nearest `t / 1000`, as the numeric's cast gives. A day or more (never a first token, but a row may say so) goes the
 * numeric way, where date_part would round twice.
 */
const TTFT_MS = `case when attempt_first_token_at < attempt_started_at + interval '24 hours'
                      and attempt_started_at < attempt_first_token_at + interval '24 hours'
                     then date_part('epoch', (attempt_first_token_at - attempt_started_at) * 1000)
                     else (extract(epoch from attempt_first_token_at - attempt_started_at) * 1000)::float8 end`;

/** The attempts of the connection `c.cid` (a uuid) over the day: the answering ones, then a route's earlier ones. */
const attempts = (throughRoute: boolean) => `
  select attempt_started_at as at, attempt_status as st, attempt_duration_ms::float8 as ms, ${TTFT_MS} as ttft
    from invocations
   where provider_connection_id = c.cid and started_at >= :since and attempt_id is not null
     ${throughRoute ? 'and route_id = :route' : ''}
  union all
  select (e->>'startedAt')::timestamptz, e->>'status', (e->>'durationMs')::float8, null
    from invocations i cross join lateral jsonb_array_elements(i.attempts) e
   where i.route_id = any(:routes) and i.started_at >= :since and i.attempts is not null
     and e->>'providerConnectionId' = c.cid::text`;

/** The names of a window's figures in the query's row per connection (windowSums). */
const figureNames = (window: HealthWindow) => ['attempts', 'errors', 'latency', 'ttft'].map((f) => `${f}_${window}`);

/**
 * A window's figures over the day's attempts of a connection (`a`), those from its start (`:since_<window>`): each
 * window an aggregate with its filter over the same rows, rather than the rows once per window.
 */
function windowSums(window: HealthWindow): string {
  const inWindow = `a.at >= :since_${window}`;
  const [attempts, errors, latency, ttft] = figureNames(window);
  return `count(a.at) filter (where ${inWindow})::int as ${attempts},
                  count(a.at) filter (where ${inWindow} and a.st in ('UPSTREAM_ERROR', 'FAILED'))::int as ${errors},
                  percentile_cont(array[0.5, 0.95, 0.99]) within group (order by a.ms) filter (where ${inWindow}) as ${latency},
                  percentile_cont(array[0.5, 0.95, 0.99]) within group (order by a.ttft) filter (where ${inWindow}) as ${ttft}`;
}

/** A window's row of figures from the query's row per connection. */
const windowRow = (window: HealthWindow) =>
  `('${window}', ${figureNames(window)
    .map((n) => `f.${n}`)
    .join(', ')})`;

/**
 * Each connection's attempts in each window ending at `now`: counts, errors, and latency percentiles. Each
 * connection's day of attempts is read by its own index scan and summed once, each window by a filter: no join of
 * the day's rows to the connections and to each window (three times the rows, sorted on disk to be grouped at a
 * million calls a month).
 */
export async function windowFigures(q: Queryable, scope: AttemptScope, now: Date): Promise<Map<string, WindowFigures[]>> {
  const { connectionIds } = scope;
  const routeIds =
    'routeId' in scope
      ? [scope.routeId]
      : ((await q('routes').select('id').where({ workspace_id: scope.workspaceId })) as { id: string }[]).map((r) => r.id);
  const edges = Object.fromEntries(WINDOWS.map((w) => [`since_${w.window}`, new Date(now.getTime() - w.ms)]));
  const { rows } = connectionIds.length
    ? await q.raw<{ rows: RawFigures[] }>(
        `select c.cid::text as cid, w.name as window, w.attempts, w.errors, w.latency, w.ttft
           from unnest(:connections) c(cid)
          cross join lateral (
                select ${WINDOWS.map(({ window }) => windowSums(window)).join(', ')}
                  from (${attempts('routeId' in scope)}) a
                 where a.at >= :since_1d and a.at <= :now) f
          cross join lateral (values ${WINDOWS.map(({ window }) => windowRow(window)).join(', ')}) w(name, attempts, errors, latency, ttft)`,
        {
          ...edges,
          since: edges.since_1d,
          now,
          connections: q.raw('?::uuid[]', [connectionIds]),
          routes: q.raw('?::uuid[]', [routeIds]),
          ...('routeId' in scope ? { route: scope.routeId } : {}),
        },
      )
    : { rows: [] };
  const byKey = new Map(rows.map((r) => [`${r.cid} ${r.window}`, r]));
  return new Map(
    connectionIds.map((cid) => [
      cid,
      WINDOWS.map(({ window, ms }) => {
        const r = byKey.get(`${cid} ${window}`);
        return {
          window,
          since: new Date(now.getTime() - ms),
          attempts: r?.attempts ?? 0,
          errors: r?.errors ?? 0,
          latency: percentiles(r?.latency),
          ttft: percentiles(r?.ttft),
        };
      }),
    ]),
  );
}

interface RawFigures {
  cid: string;
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
