/** `npm run bench`'s settings, from the environment (scripts/bench.ts lists them). */

/** Seconds of each target's saturation phase (max throughput, latency under load). */
export const DURATION = Number(process.env.BENCH_DURATION ?? 3);
/** Seconds of each target's fixed-rate phase (CPU per call, RSS). */
export const RATE_DURATION = Number(process.env.BENCH_RATE_DURATION ?? 5);
/** Seconds of each target's light phase (one request at a time: latency, time to first byte). */
export const LIGHT_DURATION = Number(process.env.BENCH_LIGHT_DURATION ?? 3);
/** Seconds of saturation before each target's phases (pools, JIT, connections). */
export const WARMUP = Number(process.env.BENCH_WARMUP ?? 1);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** End users (inference keys) the Nexus load is spread over; 'nexus, 1 user' runs with one. */
export const USERS = Number(process.env.BENCH_USERS ?? 64);
/** Rounds of the whole measurement; each figure printed is its median over them, with its interquartile range. */
export const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 10));
/** The targets measured: BENCH_TARGETS, separated by ';'; 'all' is every one; unset: the floor and each build's plain target. */
const TARGETS = process.env.BENCH_TARGETS?.split(';').map((t) => t.trim());
export const BUILDS = (process.env.BENCH_NEXUS ?? 'compiled').split(';').map((b) => b.trim());
for (const build of BUILDS)
  if (build !== 'compiled' && build !== 'tsx' && !build.startsWith('checkout='))
    throw new Error(`BENCH_NEXUS: unknown build '${build}' (compiled, tsx, checkout=<dir>)`);
/** Requests per second offered in the fixed-rate phase (as PACING says), below what every target answers; 0: no such phase. */
export const RATE = Number(process.env.BENCH_RATE ?? 800);
/**
 * How the fixed-rate phase offers BENCH_RATE: 'even' (the default), each request at its own time (openLoop,
 * scripts/lib/scale-load.ts); 'bursts' (BENCH_PACING=bursts), autocannon's overallRate, which sends each connection's
 * share of a second as fast as answers come from the second's start, so a target works at saturation for part of each
 * second and idles the rest.
 */
export const PACING = process.env.BENCH_PACING === 'bursts' ? 'bursts' : 'even';
/** BENCH_TOGETHER=1: the Nexus builds under load at the same time (measureTogether). */
export const TOGETHER = process.env.BENCH_TOGETHER === '1';
export const FEATURES = process.env.BENCH_FEATURES === '1';
/** The suffix of the targets with rules and limits (BENCH_FEATURES). */
export const FEATURED = ', rules and limits';
export const ROUTE = process.env.BENCH_ROUTE === '1';
export const EVENTS = process.env.BENCH_EVENTS === '1';
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const ROOT_KEY = 'nx-mgmt-bench-root-0123456789abcdefghijklmnop';
export const PROVIDER_KEY = 'sk-bench-upstream-0123456789';
/** The gateway path the benchmark calls. */
export const CHAT_PATH = '/v1/chat/completions';

/** Whether `target` is measured: named in BENCH_TARGETS, or (unset) the floor and the builds' plain and optional targets. */
export function wanted(target: string, optional: boolean): boolean {
  if (TARGETS?.includes('all')) return true;
  if (TARGETS) return TARGETS.includes(target);
  return !optional;
}
