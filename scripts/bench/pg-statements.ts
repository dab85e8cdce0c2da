/**
 * BENCH_PG_STATEMENTS=1: where PostgreSQL's time per call goes, by statement. Around each fixed-rate phase the bench
 * reads pg_stat_statements for the target's role, and at the end prints, per target and mode, the statements that
 * took the most time: calls per 1,000 gateway calls, execution and planning µs per gateway call, and their share of
 * the statements' total. Needs the extension loaded (shared_preload_libraries = 'pg_stat_statements', and
 * `create extension pg_stat_statements` in DATABASE_URL's database), which a shared cluster usually lacks: run the
 * bench against a private cluster for this. The times are the statements' wall time inside the backend (close to
 * its CPU on a host with the cluster to itself); what the backend spends outside statements (the protocol, a
 * connection's start) is the difference with the bench's CPU figure from /proc.
 */
import type pg from 'pg';

const PG_STATEMENTS = process.env.BENCH_PG_STATEMENTS === '1';
/** How many statements per target are printed (BENCH_PG_STATEMENTS_TOP, default 15). */
const TOP = Number(process.env.BENCH_PG_STATEMENTS_TOP ?? 15);

interface Counters {
  query: string;
  calls: number;
  /** ms */
  exec: number;
  plan: number;
}

type Snapshot = Map<string, Counters>;

/** Per target and mode: the statements' counters summed over the rounds' fixed-rate phases, and the gateway calls. */
const totals = new Map<string, { gatewayCalls: number; statements: Snapshot }>();

/** The role's statement counters now; undefined when the extension is not there. */
export async function statementsNow(admin: pg.Client, role: string | undefined): Promise<Snapshot | undefined> {
  if (!PG_STATEMENTS || !role) return undefined;
  const { rows } = await admin
    .query<{ queryid: string; query: string; calls: string; exec: number; plan: number }>(
      `select queryid::text, query, calls::text, total_exec_time as exec, total_plan_time as plan
         from pg_stat_statements s join pg_roles r on r.oid = s.userid where r.rolname = $1`,
      [role],
    )
    .catch(() => ({ rows: [] }));
  return new Map(rows.map((r) => [r.queryid, { query: r.query, calls: Number(r.calls), exec: r.exec, plan: r.plan }]));
}

/** Adds what the role's statements did between two snapshots to the target's totals. */
export function addStatements(key: string, before: Snapshot | undefined, after: Snapshot | undefined, gatewayCalls: number): void {
  if (!before || !after) return;
  const total = totals.get(key) ?? { gatewayCalls: 0, statements: new Map() };
  totals.set(key, total);
  total.gatewayCalls += gatewayCalls;
  for (const [id, a] of after) {
    const b = before.get(id) ?? { calls: 0, exec: 0, plan: 0 };
    if (a.calls === b.calls) continue;
    const sum = total.statements.get(id) ?? { query: a.query, calls: 0, exec: 0, plan: 0 };
    sum.calls += a.calls - b.calls;
    sum.exec += a.exec - b.exec;
    sum.plan += a.plan - b.plan;
    total.statements.set(id, sum);
  }
}

const oneLine = (query: string, width = 90) => {
  const flat = query.replace(/\s+/g, ' ').trim();
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat;
};

/** The table of the statements that took the most time, per target and mode. */
export function printStatements(): void {
  if (!PG_STATEMENTS) return;
  if (![...totals.values()].some((t) => t.statements.size)) {
    console.log('\nBENCH_PG_STATEMENTS: pg_stat_statements is not loaded in this cluster (shared_preload_libraries).');
    return;
  }
  for (const [key, { gatewayCalls, statements }] of totals) {
    const list = [...statements.values()].sort((p, q) => q.exec + q.plan - (p.exec + p.plan));
    const all = list.reduce((n, s) => n + s.exec + s.plan, 0);
    const perCall = (ms: number) => ((ms * 1000) / gatewayCalls).toFixed(1);
    console.log(
      `\nPostgreSQL statements at the fixed rate, ${key}: ${gatewayCalls} gateway calls, ${perCall(all)} µs a call in statements`,
    );
    console.log('| statement | per 1,000 calls | exec µs a call | plan µs a call | share |');
    console.log('|---|---:|---:|---:|---:|');
    for (const s of list.slice(0, TOP))
      console.log(
        `| ${oneLine(s.query).replace(/\|/g, '\\|')} | ${((s.calls * 1000) / gatewayCalls).toFixed(1)} | ${perCall(s.exec)} | ${perCall(s.plan)} | ${(((s.exec + s.plan) * 100) / all).toFixed(1)}% |`,
      );
    const rest = list.slice(TOP);
    if (rest.length)
      console.log(
        `| ${rest.length} others | ${((rest.reduce((n, s) => n + s.calls, 0) * 1000) / gatewayCalls).toFixed(1)} | ${perCall(rest.reduce((n, s) => n + s.exec, 0))} | ${perCall(rest.reduce((n, s) => n + s.plan, 0))} | ${((rest.reduce((n, s) => n + s.exec + s.plan, 0) * 100) / all).toFixed(1)}% |`,
      );
  }
}
