/**
 * The fixed-rate phase's load: requests sent at evenly spaced times, whatever the answers do (an open loop), over a
 * keep-alive pool of BENCH_CONNECTIONS connections.
 *
 * autocannon's `overallRate` does not pace: each connection sends its share of the second as fast as its answers come,
 * from the start of each second, then waits for the next. At 800 requests/s over 32 connections a target then works
 * at saturation for the first fifth of each second and idles the rest: its CPU per call is that of bursts. Here the
 * i-th request leaves at i / rate seconds (a timer every millisecond sends those due), so the target sees the rate it
 * is said to be offered. BENCH_PACING=bursts measures with autocannon's way instead, to compare.
 */
import { Pool } from 'undici';

export interface PacedResult {
  /** Requests that ended (answered, in any status, or failed), and those not answered 200. */
  calls: number;
  errors: number;
  /** Latency from each request's scheduled time to its answer's end, ms (a queue behind a slow answer counts). */
  p50: number;
  p99: number;
}

export async function paced(
  url: string,
  body: string,
  headers: Record<string, string>,
  keys: string[],
  connections: number,
  seconds: number,
  rate: number,
): Promise<PacedResult> {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const path = target.pathname + target.search;
  const total = Math.round(rate * seconds);
  const latencies: number[] = [];
  let errors = 0;
  const inFlight = new Set<Promise<void>>();
  const start = performance.now();

  const send = (i: number) => {
    const due = start + (i * 1000) / rate;
    const authorization = keys.length ? { authorization: `Bearer ${keys[i % keys.length]}` } : {};
    const call = pool
      .request({ method: 'POST', path, headers: { ...headers, ...authorization }, body })
      .then(async (res) => {
        await res.body.dump({ limit: Infinity });
        if (res.statusCode !== 200) errors++;
      })
      .catch(() => {
        errors++;
      })
      .finally(() => {
        latencies.push(performance.now() - due);
        inFlight.delete(call);
      });
    inFlight.add(call);
  };

  let sent = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
      while (sent < due) send(sent++);
      if (sent < total) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  while (inFlight.size) await Promise.all(inFlight);
  await pool.close();

  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
  return { calls: latencies.length, errors, p50: at(0.5), p99: at(0.99) };
}
