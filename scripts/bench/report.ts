/**
 * What `npm run bench` prints: each figure as the median of the rounds with its interquartile range, and the ratios
 * between targets taken within each round (where they ran back to back), then their median and interquartile range.
 */
import { cpus, totalmem } from 'node:os';
import {
  CONNECTIONS,
  DATABASE_URL,
  DURATION,
  FEATURED,
  LIGHT_DURATION,
  PACING,
  RATE,
  RATE_DURATION,
  ROUNDS,
  TOGETHER,
  USERS,
  WARMUP,
} from './config.js';
import type { Row } from './measure.js';

type Figure = number | undefined;

/** The median and quartiles of the figures known (linear interpolation between the closest ranks). */
function quartiles(xs: Figure[]): { median: number; q1: number; q3: number } | undefined {
  const known = xs.filter((x): x is number => x !== undefined && !Number.isNaN(x)).sort((p, q) => p - q);
  if (!known.length) return undefined;
  const at = (p: number) => {
    const i = (known.length - 1) * p;
    const lo = Math.floor(i);
    return known[lo]! + (known[Math.min(lo + 1, known.length - 1)]! - known[lo]!) * (i - lo);
  };
  return { median: at(0.5), q1: at(0.25), q3: at(0.75) };
}

/** "median [q1, q3]" of the figures, `d` decimals (a single round: its figure alone). */
function mq(xs: Figure[], d = 0, unit = ''): string {
  const q = quartiles(xs);
  if (!q) return '-';
  if (xs.length === 1) return `${q.median.toFixed(d)}${unit}`;
  return `${q.median.toFixed(d)}${unit} [${q.q1.toFixed(d)}, ${q.q3.toFixed(d)}]`;
}

const rowOf = (round: Row[], target: string, mode: string) => round.find((r) => r.target === target && r.mode === mode);

/** One figure of a target across the rounds. */
function across(rounds: Row[][], target: string, mode: string, pick: (r: Row) => Figure): Figure[] {
  return rounds.map((round) => {
    const r = rowOf(round, target, mode);
    return r ? pick(r) : undefined;
  });
}

/** A figure of two targets combined within each round (a ratio, a difference), across the rounds. */
function paired(rounds: Row[][], target: string, base: string, mode: string, combine: (t: Row, b: Row) => Figure): Figure[] {
  return rounds.map((round) => {
    const t = rowOf(round, target, mode);
    const b = rowOf(round, base, mode);
    return t && b ? combine(t, b) : undefined;
  });
}

const ratio =
  (pick: (r: Row) => Figure, pct = false) =>
  (t: Row, b: Row) => {
    const tv = pick(t);
    const bv = pick(b);
    return tv !== undefined && bv ? (pct ? (100 * tv) / bv : tv / bv) : undefined;
  };
const minus = (pick: (r: Row) => Figure) => (t: Row, b: Row) => {
  const tv = pick(t);
  const bv = pick(b);
  return tv !== undefined && bv !== undefined && !Number.isNaN(tv) && !Number.isNaN(bv) ? tv - bv : undefined;
};
const withPg = (r: Row) => (r.cpuProxy !== undefined && r.cpuPg !== undefined ? r.cpuProxy + r.cpuPg : undefined);

function printHeader(): void {
  const cpu = cpus();
  console.log(
    `\nGateway overhead (${new Date().toISOString()}; ${cpu.length} x ${cpu[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; PostgreSQL at ${new URL(DATABASE_URL).host})`,
  );
  console.log(
    `${ROUNDS} round(s), the targets measured in turn in each, their order reversed every other round. Per target and mode: ${WARMUP} s warm-up; ` +
      (RATE
        ? `${RATE_DURATION} s at ${RATE} req/s offered, ${PACING === 'even' ? 'evenly paced' : "in bursts (autocannon's overallRate)"} (CPU per call, RSS at its end); `
        : '') +
      `${DURATION} s at saturation, ${CONNECTIONS} connections (req/s, latency under load in whole ms); ` +
      (TOGETHER ? '' : `${LIGHT_DURATION} s one request at a time (latency and TTFB in ms). `) +
      `Nexus calls spread over ${USERS} users. Each figure: the median of the rounds [its interquartile range: first quartile, third].`,
  );
  console.log(
    `CPU per call: the proxy's process (all its threads, /proc schedstat) and the PostgreSQL backends serving it (its own role), ${RATE ? `at ${RATE} req/s offered (req/s answered: below it, the target could not keep up)` : 'at saturation'}.\n`,
  );
}

/** Each target's own figures. */
function printTargets(rounds: Row[][]): void {
  console.log(
    '| target | mode | req/s answered | CPU µs/call | of which user | PostgreSQL µs/call | calls per record statement | lease statements per 1,000 calls | backends opened | RSS MiB | req/s (max) | CPU µs/call (max) | PostgreSQL µs/call (max) | p50 / p99 ms (load) | p50 ms (1 conn) | p99 ms (1 conn) | TTFB p50 | TTFB p99 | errors |',
  );
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const first of rounds[0]!) {
    const f = (pick: (r: Row) => Figure, d = 0) => mq(across(rounds, first.target, first.mode, pick), d);
    const errors = across(rounds, first.target, first.mode, (r) => r.errors).reduce((n: number, e) => n + (e ?? 0), 0);
    console.log(
      `| ${first.target} | ${first.mode} | ${f((r) => r.answered)} | ${f((r) => r.cpuProxy)} | ${f((r) => r.cpuProxyUser)} | ${f((r) => r.cpuPg)} | ${f((r) => r.callsPerRecord, 1)} | ${f((r) => r.leasePer1k, 1)} | ${f((r) => r.newBackends)} | ${f((r) => r.rssMb)} | ${f((r) => r.rps)} | ${f((r) => r.cpuMax)} | ${f((r) => r.pgMax)} | ${f((r) => r.p50)} / ${f((r) => r.p99)} | ${f((r) => r.lightP50, 2)} | ${f((r) => r.lightP99, 2)} | ${f((r) => r.ttfb50, 2)} | ${f((r) => r.ttfb99, 2)} | ${errors} |`,
    );
  }
}

/** Each Nexus build against the floor, the ratio or difference taken in each round. */
function printAgainstFloor(rounds: Row[][], labels: string[]): void {
  if (!rounds[0]!.some((r) => r.target === 'floor')) return;
  console.log('\nAgainst the floor (a bare undici passthrough), taken in each round; latencies added at one connection, in ms:');
  console.log('| target | mode | CPU/call ratio | throughput share | added p50 | added p99 | added TTFB p50 | added TTFB p99 |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|');
  for (const label of labels) {
    for (const mode of ['json', 'stream']) {
      const p = (combine: (t: Row, b: Row) => Figure, d: number, unit = '') => mq(paired(rounds, label, 'floor', mode, combine), d, unit);
      if (!rowOf(rounds[0]!, label, mode)) continue;
      const stream = mode === 'stream';
      const cells = [
        p(
          ratio((r) => r.cpuProxy),
          2,
          '×',
        ),
        p(
          ratio((r) => r.rps, true),
          1,
          '%',
        ),
        p(
          minus((r) => r.lightP50),
          2,
        ),
        p(
          minus((r) => r.lightP99),
          2,
        ),
        stream
          ? p(
              minus((r) => r.ttfb50),
              2,
            )
          : '-',
        stream
          ? p(
              minus((r) => r.ttfb99),
              2,
            )
          : '-',
      ];
      console.log(`| ${label} | ${mode} | ${cells.join(' | ')} |`);
    }
  }
}

/**
 * Each Nexus target against the first build's plain one (a tenant with rules and limits: against its own build's
 * plain one), the CPU per call's ratio taken in each round.
 */
function printBuilds(rounds: Row[][], compared: string[]): void {
  if (compared.length < 2) return;
  const first = compared[0]!;
  const baseOf = (label: string) => (label.endsWith(FEATURED) ? label.slice(0, -FEATURED.length) : first);
  console.log(
    '\n| target | against | mode | CPU µs/call, its | PostgreSQL µs/call, its | CPU per call / its | (proxy and PostgreSQL) | req/s / its |',
  );
  console.log('|---|---|---|---:|---:|---:|---:|---:|');
  for (const label of compared.slice(1)) {
    for (const mode of ['json', 'stream']) {
      const base = baseOf(label);
      if (!rowOf(rounds[0]!, label, mode) || !rowOf(rounds[0]!, base, mode)) continue;
      const own = (pick: (r: Row) => Figure) => `${mq(across(rounds, label, mode, pick))} (${mq(across(rounds, base, mode, pick))})`;
      const p = (combine: (t: Row, b: Row) => Figure, d: number, unit = '') => mq(paired(rounds, label, base, mode, combine), d, unit);
      console.log(
        `| ${label} | ${base} | ${mode} | ${own((r) => r.cpuProxy)} | ${own((r) => r.cpuPg)} | ${p(
          ratio((r) => r.cpuProxy, true),
          1,
          '%',
        )} | ${p(ratio(withPg, true), 1, '%')} | ${p(
          ratio((r) => r.rps, true),
          1,
          '%',
        )} |`,
      );
    }
  }
}

/** An optional target (rules and limits, a route, events) against its build's plain target. */
function printBeside(rounds: Row[][], labels: string[], suffix: string, title: string): void {
  if (!rounds[0]!.some((r) => r.target.endsWith(suffix))) return;
  console.log(`\n| target | mode | ${title}, req/s | CPU per call | added p50 ms (1 conn) | added p99 ms (1 conn) |`);
  console.log('|---|---|---:|---:|---:|---:|');
  for (const label of labels) {
    for (const mode of ['json', 'stream']) {
      const target = `${label}${suffix}`;
      if (!rowOf(rounds[0]!, target, mode) || !rowOf(rounds[0]!, label, mode)) continue;
      const p = (combine: (t: Row, b: Row) => Figure, d: number, unit = '') => mq(paired(rounds, target, label, mode, combine), d, unit);
      console.log(
        `| ${target} | ${mode} | ${p(
          ratio((r) => r.rps, true),
          1,
          '%',
        )} | ${p(
          ratio((r) => r.cpuProxy, true),
          1,
          '%',
        )} | ${p(
          minus((r) => r.lightP50),
          2,
        )} | ${p(
          minus((r) => r.lightP99),
          2,
        )} |`,
      );
    }
  }
}

/** Everything the rounds measured; `labels`: the plain target of each Nexus build. */
export function report(rounds: Row[][], labels: string[]): void {
  printHeader();
  printTargets(rounds);
  printAgainstFloor(rounds, labels);
  const compared = TOGETHER ? [...new Set(rounds[0]!.map((r) => r.target).filter((t) => t.startsWith('nexus')))] : labels;
  printBuilds(rounds, compared);
  printBeside(rounds, labels, FEATURED, 'with rules and limits / without');
  printBeside(rounds, labels, ', route', 'through a route / the connection');
  printBeside(rounds, labels, ', events', 'with an endpoint subscribed to thresholds / without');
}
