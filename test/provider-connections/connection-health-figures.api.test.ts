/**
 * The figures of a connection's health (windowFigures: getProviderConnectionHealth's windows, and each target's in
 * getRouteHealth) against the same sums written plainly, number for number, on invocations seeded at chosen times:
 * direct attempts and a route's (the answering attempt and those before it, in the invocation's `attempts`) in the
 * same windows, every status, durations and times to first token to the microsecond, a first token missing, one a day
 * or more after its attempt's start and one before it, attempts at a window's first instant, before the day and after
 * the time asked, and another connection's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { windowFigures } from '../../src/domain/provider-connections/connection-health-repo.js';
import { newId } from '../../src/ids.js';
import { createTenant } from '../gateway/gateway-support.js';
import { startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { createProviderConnection, createRoute } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let up: FakeUpstream;
const KEY = testProviderKey('connection-health-figures');

beforeAll(async () => {
  t = await startTestApp();
  up = await startFakeUpstream('openai', [KEY]);
});
afterAll(async () => {
  await up?.close();
  await t?.close();
});

const WINDOWS = [
  { window: '5m', ms: 5 * 60_000 },
  { window: '1h', ms: 3_600_000 },
  { window: '1d', ms: 86_400_000 },
] as const;
const STATUSES = ['SUCCEEDED', 'UPSTREAM_ERROR', 'FAILED', 'ABORTED'];

/** A small deterministic generator (mulberry32), so that a failure shows the same rows again. */
function generator(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** An instant `micros` microseconds after `base`, as PostgreSQL reads it (a Date holds milliseconds only). */
const at = (base: Date, micros: number) => {
  const ms = Math.floor(micros / 1000);
  const rest = micros - ms * 1000;
  return `${new Date(base.getTime() + ms).toISOString().slice(0, 23)}${String(rest).padStart(3, '0')}Z`;
};

/** The figures of `connection` over each window ending at `now`, summed plainly: one query a window, numeric TTFT. */
async function plainFigures(workspaceId: string, connection: string, now: Date, routeId?: string) {
  const db = t.database.db;
  return Promise.all(
    WINDOWS.map(async ({ window, ms }) => {
      const since = new Date(now.getTime() - ms);
      const { rows } = await db.raw<{ rows: { attempts: number; errors: number; latency: number[] | null; ttft: number[] | null }[] }>(
        `select count(*)::int as attempts, count(*) filter (where st in ('UPSTREAM_ERROR', 'FAILED'))::int as errors,
                percentile_cont(array[0.5, 0.95, 0.99]) within group (order by ms) as latency,
                percentile_cont(array[0.5, 0.95, 0.99]) within group (order by ttft) as ttft
           from (select attempt_started_at as at, attempt_status as st, attempt_duration_ms::float8 as ms,
                        (extract(epoch from attempt_first_token_at - attempt_started_at) * 1000)::float8 as ttft
                   from invocations
                  where provider_connection_id = :connection and attempt_id is not null
                    and (cast(:route as uuid) is null or route_id = cast(:route as uuid))
                 union all
                 select (e->>'startedAt')::timestamptz, e->>'status', (e->>'durationMs')::float8, null
                   from invocations i, jsonb_array_elements(i.attempts) e
                  where (cast(:route as uuid) is null and i.route_id in (select id from routes where workspace_id = :workspace)
                         or i.route_id = cast(:route as uuid))
                    and i.attempts is not null and e->>'providerConnectionId' = :connection) a
          where at >= :since and at <= :now`,
        { connection, workspace: workspaceId, route: routeId ?? null, since, now },
      );
      const r = rows[0]!;
      const three = (v: number[] | null) => (v && !v.some((x) => x === null) ? v.map(Number) : null);
      return { window, since, attempts: r.attempts, errors: r.errors, latency: three(r.latency), ttft: three(r.ttft) };
    }),
  );
}

describe("a connection's health figures", () => {
  it('are the plain sums of its attempts, direct and through a route, in each window', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const mine = tenant.connectionId;
    /** Another connection of the tenant's workspace to the same upstream. */
    const connection = async (name: string) =>
      (
        await createProviderConnection({
          client: t.client,
          path: { workspaceId: tenant.workspaceId },
          body: { name, protocolProfile: 'openai', baseUrl: up.url, apiKey: KEY },
        })
      ).data!.id;
    const other = await connection('other');
    const edge = await connection('edge');
    const route = (
      await createRoute({
        client: t.client,
        path: { workspaceId: tenant.workspaceId },
        body: { name: 'both', targets: [{ providerConnectionId: other }, { providerConnectionId: mine }] },
      })
    ).data!.id;

    const now = new Date(Date.now() - 1000);
    const random = generator(53);
    const rows: Record<string, unknown>[] = [];
    /** An invocation whose answering attempt started `ago` µs before now (its call at the same time). */
    const invocation = (
      ago: number,
      o: { connection?: string; ttft?: number | null; ms?: number; status?: string; via?: boolean; earlier?: object[] },
    ) => {
      const start = at(now, -ago);
      const status = o.status ?? STATUSES[Math.floor(random() * STATUSES.length)]!;
      rows.push({
        id: newId(),
        workspace_id: tenant.workspaceId,
        workspace_access_id: newId(),
        provider_connection_id: o.connection ?? mine,
        inference_key_id: newId(),
        request_id: `req-${rows.length}`,
        method: 'POST',
        endpoint: '/v1/chat/completions',
        status: status === 'SUCCEEDED' ? 'SUCCEEDED' : 'UPSTREAM_ERROR',
        metering_status: 'metered',
        started_at: start,
        attempt_id: newId(),
        attempt_status: status,
        attempt_started_at: start,
        attempt_first_token_at: o.ttft === null ? null : at(now, -ago + (o.ttft ?? Math.floor(random() * 2_000_000))),
        attempt_duration_ms: o.ms ?? Math.round(random() * 3_000_000) / 1000,
        route_id: o.via ? route : null,
        attempts: o.earlier ? JSON.stringify(o.earlier) : null,
      });
    };
    /** An attempt before the answering one, on `connection`, `ago` µs before now. */
    const earlier = (connection: string, ago: number) => ({
      providerConnectionId: connection,
      startedAt: at(now, -ago),
      status: random() < 0.7 ? 'UPSTREAM_ERROR' : 'FAILED',
      durationMs: Math.round(random() * 900_000) / 1000,
    });

    const MINUTE = 60_000_000;
    // Spread over the day, most in the last hour and 5 minutes, direct and through the route.
    for (let i = 0; i < 120; i++) {
      const span = i % 3 === 0 ? 5 * MINUTE : i % 3 === 1 ? 60 * MINUTE : 1440 * MINUTE;
      const ago = Math.floor(random() * span);
      const via = i % 4 === 0;
      invocation(ago, {
        connection: i % 7 === 0 ? other : mine,
        via,
        ...(via && i % 8 === 0 ? { earlier: [earlier(mine, ago + 400_000), earlier(other, ago + 200_000)] } : {}),
      });
    }
    // Times to first token: none, a day and more (1 day 00:36:42.697342), a day less a microsecond, a day, before the
    // attempt's start.
    const TTFTS = [null, 88_602_697_342, 86_400_000_000 - 1, 86_400_000_000, -2_500, 1_234_567, 999];
    for (const [i, ttft] of TTFTS.entries()) invocation(2 * MINUTE + i * 20_000_000, { ttft });
    // The same alone on a connection of their own, 10 minutes apart: each the only attempt of a 5 minutes' window.
    const alone = TTFTS.map((ttft, i) => {
      invocation((i + 1) * 10 * MINUTE, { connection: edge, ttft });
      return new Date(now.getTime() - (i + 1) * 600_000);
    });
    // At each window's first instant (in it), a microsecond before the day (not), after the time asked (not).
    for (const { ms } of WINDOWS) invocation(ms * 1000, { ttft: 123_457, ms: 77.7 });
    invocation(1440 * MINUTE + 1, { ms: 5 });
    invocation(-1, { ms: 6 });
    // A call of the route whose earlier attempts on this connection began before the day, and after the time asked.
    invocation(10 * MINUTE, { via: true, connection: other, earlier: [earlier(mine, 1440 * MINUTE + 5), earlier(mine, 1)] });
    // A call of the route answered by another connection after an earlier attempt on this one in the last 5 minutes.
    invocation(MINUTE, { via: true, connection: other, earlier: [earlier(mine, MINUTE + 300_000)] });
    await t.database.db('invocations').insert(rows);

    const db = t.database.db;
    const all = await windowFigures(db, { workspaceId: tenant.workspaceId, connectionIds: [mine, other] }, now);
    for (const connection of [mine, other]) {
      expect(all.get(connection)).toEqual(await plainFigures(tenant.workspaceId, connection, now));
    }
    const throughRoute = await windowFigures(db, { routeId: route, connectionIds: [mine, other] }, now);
    for (const connection of [mine, other]) {
      expect(throughRoute.get(connection)).toEqual(await plainFigures(tenant.workspaceId, connection, now, route));
    }
    for (const [i, when] of alone.entries()) {
      const [fiveMinutes] = (await windowFigures(db, { workspaceId: tenant.workspaceId, connectionIds: [edge] }, when)).get(edge)!;
      expect(fiveMinutes).toEqual((await plainFigures(tenant.workspaceId, edge, when))[0]);
      expect(fiveMinutes!.attempts).toBe(1);
      expect(fiveMinutes!.ttft === null).toBe(TTFTS[i] === null);
    }
    // The rows say what the test means: attempts in every window, direct and through the route, a TTFT to the microsecond.
    const [fiveMinutes, , day] = all.get(mine)!;
    expect(fiveMinutes!.attempts).toBeGreaterThan(10);
    expect(day!.attempts).toBeGreaterThan(fiveMinutes!.attempts);
    expect(day!.ttft!.some((v) => !Number.isInteger(v))).toBe(true);
    expect(throughRoute.get(mine)![2]!.attempts).toBeLessThan(day!.attempts);
  });
});
