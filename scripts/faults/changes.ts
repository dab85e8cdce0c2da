/** `npm run faults`, scenario 5: a change made on one process, applied by another. */
import { activateWorkspaceAccess, suspendWorkspaceAccess } from '../../test/support/sdk.js';
import { adminClient } from '../../test/support/tenant.js';
import type { NexusProcess } from '../lib/nexus-process.js';
import { DATABASE_URL, ROOT_KEY, callOnce, nexus, produce, sleep, tenant } from './common.js';

// ---- 5. a change made on one process, applied by another -----------------------------------------
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

/**
 * The access is suspended, then activated, 20 times in all, through process D's Admin API, while process E
 * (its lookup cached, for up to 5 s) is sent a call every 2 ms, without waiting for the answers. E applied
 * the change between the start of the last call that did not show it and the start of the first that did:
 * both are reported, in milliseconds from D's answer. D's own next call is checked too.
 */
export async function changesScenario(upstream: string): Promise<string> {
  const env = { NEXUS_AUTH_CACHE_TTL_MS: '5000' };
  const d = await nexus(DATABASE_URL, env);
  const e = await nexus(DATABASE_URL, env);
  const t = await tenant(d, upstream, 1_000_000_000);
  const call = (through: NexusProcess) => callOnce(t.gateway(through), t.apiKey, { maxTokens: 5, headers: produce(1) });
  /** Per change: [last call not showing it started, first call showing it started], ms after D's answer. */
  const applied: [number, number][] = [];
  const callMs: number[] = [];
  let sameProcessSaw = 0;
  const rounds = 20;
  for (let round = 0; round < rounds; round++) {
    const want = round % 2 === 0 ? 403 : 200;
    const before = performance.now();
    await call(e);
    callMs.push(performance.now() - before);
    const change = want === 403 ? suspendWorkspaceAccess : activateWorkspaceAccess;
    const changed = await change({ client: adminClient(d.url, ROOT_KEY), path: { accessId: t.accessId } });
    if (changed.response.status !== 200) throw new Error(`access change: ${changed.response.status} ${JSON.stringify(changed.error)}`);
    const answeredAt = performance.now();
    const [own] = await Promise.all([
      call(d),
      (async () => {
        const calls: Promise<{ started: number; shows: boolean }>[] = [];
        let shown = false;
        while (!shown) {
          const started = performance.now() - answeredAt;
          if (started > 10_000) throw new Error('the other process did not apply the change within 10 s');
          calls.push(call(e).then((a) => ((shown ||= a.status === want), { started, shows: a.status === want })));
          await sleep(2);
        }
        const answers = await Promise.all(calls);
        const first = Math.min(...answers.filter((a) => a.shows).map((a) => a.started));
        applied.push([Math.max(0, ...answers.filter((a) => !a.shows && a.started < first).map((a) => a.started)), first]);
      })(),
    ]);
    if (own.status === want) sameProcessSaw++;
  }
  await d.stop();
  await e.stop();
  const ms = (v: number) => v.toFixed(1);
  const range = (p: number | 'max') => {
    const pick = (values: number[]) => (values.sort((a, b) => a - b), p === 'max' ? values.at(-1)! : percentile(values, p));
    return `${ms(pick(applied.map(([from]) => from)))} to ${ms(pick(applied.map(([, to]) => to)))}`;
  };
  callMs.sort((a, b) => a - b);
  return `| ${rounds} (suspend, activate) | ${sameProcessSaw}/${rounds} | ${range(0.5)} | ${range(0.9)} | ${range('max')} | ${ms(percentile(callMs, 0.5))} |`;
}
