/**
 * The load bench:scale (scale.ts) offers a Nexus, a chat call with a small answer sent closed loop by autocannon or
 * open loop at a fixed rate, and what it reads back: the quartiles of its rounds, the process's heap. `npm run bench`'s
 * fixed-rate phase is the same open loop (scripts/bench/measure.ts).
 */
import type autocannon from 'autocannon';
import type { Pool } from 'undici';

export const BODY = JSON.stringify({ model: 'scale-model', messages: [{ role: 'user', content: 'scale' }], max_tokens: 16 });

/** autocannon's options for the tenant's calls, its keys in turn. */
export function load(url: string, apiKeys: string[], connections: number) {
  let next = 0;
  return {
    url,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json' },
    body: BODY,
    connections,
    pipelining: 1,
    requests: [
      {
        setupRequest: (r: autocannon.Request) => ({
          ...r,
          headers: { ...r.headers, authorization: `Bearer ${apiKeys[next++ % apiKeys.length]}` },
        }),
      },
    ],
  };
}

/**
 * Open loop: `rate` calls a second for `seconds`, each sent when it is due whatever the answers before it
 * took (the tenant's keys in turn, if any), over `pool`; each call's latency counted from when it was due, so a
 * slow answer cannot hide the calls it would have held back. Waits for every answer. `body` and `headers`: the
 * call's (BODY, JSON, by default).
 */
export async function openLoop(
  pool: Pool,
  path: string,
  apiKeys: string[],
  rate: number,
  seconds: number,
  body = BODY,
  headers: Record<string, string> = {},
) {
  const total = Math.round(rate * seconds);
  const latencies: number[] = [];
  /** The latencies of the calls due in each second of the run. */
  const bySecond: number[][] = Array.from({ length: Math.ceil(seconds) }, () => []);
  let non2xx = 0;
  const calls: Promise<void>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait >= 1) await new Promise((r) => setTimeout(r, wait));
    const call = pool
      .request({
        path,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...headers,
          ...(apiKeys.length ? { authorization: `Bearer ${apiKeys[i % apiKeys.length]}` } : {}),
        },
        body,
      })
      .then(async (res) => {
        await res.body.dump();
        if (res.statusCode !== 200) non2xx++;
        const latency = performance.now() - due;
        latencies.push(latency);
        bySecond[Math.floor((due - t0) / 1000)]?.push(latency);
      })
      .catch(() => void non2xx++);
    calls.push(call);
  }
  const sentIn = (performance.now() - t0) / 1000;
  await Promise.all(calls);
  const at = (xs: number[], q: number) => Math.round(xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? 0);
  return {
    /** The calls made (each answered, in any status, or failed), and the rate they were sent at. */
    calls: total,
    sent: Math.round(total / sentIn),
    p50: at(latencies, 0.5),
    p99: at(latencies, 0.99),
    max: at(latencies, 1),
    non2xx,
    /** The p99 of the calls due in each second. */
    p99BySecond: bySecond.map((xs) => at(xs, 0.99)),
  };
}

/** The median and quartiles of `xs`. */
export const quartiles = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.round(q * (s.length - 1)))]!;
  return { median: at(0.5), q1: at(0.25), q3: at(0.75) };
};

/** V8's heap as Nexus's /metrics reports it (prom-client's default metrics), in MiB. */
export async function heapOf(url: string): Promise<{ heapTotal: number; heapUsed: number; newSpace: number; external: number }> {
  const text = await fetch(`${url}/metrics`).then((r) => r.text());
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 2 ** 20;
  return {
    heapTotal: value('nodejs_heap_size_total_bytes'),
    heapUsed: value('nodejs_heap_size_used_bytes'),
    newSpace: value('nodejs_heap_space_size_total_bytes\\{space="new"\\}'),
    external: value('nodejs_external_memory_bytes'),
  };
}
