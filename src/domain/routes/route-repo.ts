/**
 * The SQL of routes (the Admin API's), their breakers (read by the health and by every gateway process's
 * registry) and the figures of getRouteHealth, read from the invocations the gateway recorded.
 */
import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import type { BreakerRow, BreakerState, RouteRow } from './route-types.js';

/** A target's attempts over the last minute and hour and its last error, as getRouteHealth shows them. */
export interface AttemptFigures {
  provider_connection_id: string;
  calls_minute: number;
  errors_minute: number;
  calls_hour: number;
  errors_hour: number;
  last_error: string | null;
  last_error_at: Date | null;
}

/**
 * Every attempt of a route's calls since `?`: the one that answered (the invocation's attempt columns) and
 * those before it (its `attempts` array).
 */
const ATTEMPTS = `
  select provider_connection_id as cid, attempt_started_at as at, attempt_status as st,
         attempt_duration_ms::float8 as ms, attempt_error_code as err, attempt_http_status as http
    from invocations where route_id = ? and started_at > ? and attempt_id is not null
  union all
  select (e->>'providerConnectionId')::uuid, (e->>'startedAt')::timestamptz, e->>'status',
         (e->>'durationMs')::float8, e->>'errorCode', (e->>'httpStatus')::int
    from invocations i cross join lateral jsonb_array_elements(i.attempts) e
   where i.route_id = ? and i.started_at > ? and i.attempts is not null`;

export function createRouteRepo(db: Queryable) {
  const routes = table<RouteRow>(db, 'routes', { json: ['targets', 'retry_on', 'retry', 'breaker', 'metadata', 'request_log'] });
  return {
    insert: routes.insert,
    findById: routes.findById,
    findByIdForUpdate: routes.findByIdForUpdate,
    update: routes.updateById,

    async list(filter: PageRequest & { workspaceId: string }, q: Queryable = db): Promise<Page<RouteRow>> {
      return paginate<RouteRow>(q('routes').select('*').where({ workspace_id: filter.workspaceId }), filter);
    },

    /** The routes the gateway serves (all of them, or one). */
    async active(id?: string, q: Queryable = db): Promise<RouteRow[]> {
      const query = q('routes').select('*').where({ status: 'ACTIVE' });
      if (id) query.where({ id });
      return query;
    },

    async breakers(routeId: string | null, q: Queryable = db): Promise<BreakerRow[]> {
      const query = q('route_breakers').select('*');
      if (routeId) query.where({ route_id: routeId });
      return query;
    },

    /**
     * A breaker's transition, as every process will read it, written only if the breaker is still in the state it
     * leaves (`from`; no row is closed): of two processes that make the same transition at once, one changes the
     * row and gets it back; the other gets null. A close applies to any state but closed.
     */
    async transitionBreaker(row: BreakerRow, from: BreakerState, q: Queryable = db): Promise<BreakerRow | null> {
      const key = { route_id: row.route_id, provider_connection_id: row.provider_connection_id };
      const { route_id: _r, provider_connection_id: _c, ...changes } = row;
      let rows: BreakerRow[];
      if (row.state === 'closed') {
        rows = await q('route_breakers').where(key).whereNot('state', 'closed').update(changes).returning('*');
      } else if (from === 'closed') {
        rows = await q('route_breakers')
          .insert(row)
          .onConflict(['route_id', 'provider_connection_id'])
          .merge()
          .where('route_breakers.state', 'closed')
          .returning('*');
      } else {
        rows = await q('route_breakers').where(key).where('state', from).update(changes).returning('*');
      }
      return rows[0] ?? null;
    },

    /**
     * Claims the one half-open probe of an open breaker whose cooldown is over (or whose last probe's claim
     * lapsed), for `until`: null when another process has it, or the breaker is no longer open.
     */
    async claimProbe(routeId: string, connectionId: string, now: Date, until: Date, q: Queryable = db): Promise<BreakerRow | null> {
      const rows: BreakerRow[] = await q('route_breakers')
        .where({ route_id: routeId, provider_connection_id: connectionId })
        .whereRaw("((state = 'open' and retry_at <= ?) or (state = 'half_open' and probe_until <= ?))", [now, now])
        .update({ state: 'half_open', probe_until: until, updated_at: now })
        .returning('*');
      return rows[0] ?? null;
    },

    async connectionStatuses(ids: string[], q: Queryable = db): Promise<Map<string, string>> {
      if (!ids.length) return new Map();
      const rows: { id: string; status: string }[] = await q('provider_connections').select('id', 'status').whereIn('id', ids);
      return new Map(rows.map((r) => [r.id, r.status]));
    },

    async attemptFigures(routeId: string, now: Date, q: Queryable = db): Promise<AttemptFigures[]> {
      const hour = new Date(now.getTime() - 3_600_000);
      const minute = new Date(now.getTime() - 60_000);
      const { rows } = await q.raw<{ rows: AttemptFigures[] }>(
        `with a as (${ATTEMPTS}),
         figures as (
           select cid, count(*) filter (where at > ?)::int as calls_minute,
                  count(*) filter (where at > ? and st <> 'SUCCEEDED')::int as errors_minute,
                  count(*)::int as calls_hour, count(*) filter (where st <> 'SUCCEEDED')::int as errors_hour
             from a group by cid),
         last_errors as (
           select distinct on (cid) cid, coalesce(err, 'http_' || http) as last_error, at as last_error_at
             from a where st <> 'SUCCEEDED' order by cid, at desc)
         select f.cid as provider_connection_id, f.calls_minute, f.errors_minute, f.calls_hour, f.errors_hour,
                l.last_error, l.last_error_at
           from figures f left join last_errors l on l.cid = f.cid`,
        [routeId, hour, routeId, hour, minute, minute],
      );
      return rows;
    },
  };
}

export type RouteRepo = ReturnType<typeof createRouteRepo>;
