/** `npm run faults`, scenarios 3, 4 and 7: two processes on a small quota, an upstream that ignores max_tokens, the first wave on a new model. */
import type { NexusProcess } from '../lib/nexus-process.js';
import {
  BODY_BYTES,
  DATABASE_URL,
  accountOf,
  callOnce,
  db,
  nexus,
  period,
  produce,
  recorded,
  statusLine,
  tenant,
  until,
  type Answer,
  type Row,
} from './common.js';

// ---- 3. two processes, small quota --------------------------------------------------------------
export async function twoScenario(upstream: string): Promise<Row> {
  const d = await nexus();
  const e = await nexus();
  const granted = 3000;
  const t = await tenant(d, upstream, granted);
  const answers: Answer[] = [];
  await Promise.all(
    Array.from({ length: 32 }, async (_v, i) => {
      for (let n = 0; n < 12; n++)
        answers.push(await callOnce(t.gateway(i % 2 ? e : d), t.apiKey, { maxTokens: 20, headers: produce(10) }));
    }),
  );
  await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
  const delivered = answers.filter((x) => x.status === 200);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.requestId!),
  );
  await d.stop();
  await e.stop();
  return {
    scenario: `two: 2 processes, 384 calls against ${granted} units`,
    ...account,
    freedAfter: '-',
    statuses: statusLine(answers),
  };
}

// ---- 4. an upstream that ignores max_tokens -----------------------------------------------------
export async function runawayScenario(upstream: string): Promise<Row[]> {
  const f = await nexus();
  const rows: Row[] = [];
  for (const stream of [true, false]) {
    const granted = 2000;
    const t = await tenant(f, upstream, granted);
    const o = { stream, maxTokens: 20, headers: produce(500) };
    const answers: Answer[] = [];
    for (let i = 0; i < 8; i++) answers.push(await callOnce(t.gateway(f), t.apiKey, o));
    await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
    const delivered = answers.filter((x) => x.status === 200);
    const records = await recorded(t.accessId);
    const ids = new Set(records.map((r) => r.request_id));
    const p = await period(t.accessId);
    const bound = BODY_BYTES(o) + 20n;
    rows.push({
      scenario: `runaway: upstream sends 500 tokens for max_tokens 20 (${stream ? 'stream' : 'JSON'}), ${granted} units`,
      delivered: delivered.length,
      recorded: delivered.filter((x) => ids.has(x.requestId!)).length,
      lost: delivered.filter((x) => !ids.has(x.requestId!)).length,
      charged: p.consumed,
      expected: stream ? `${bound * BigInt(delivered.length)} (the bound, cut there)` : `${510n * BigInt(delivered.length)} (as reported)`,
      overspend: p.consumed > p.granted ? p.consumed - p.granted : 0n,
      reservedLeft: p.reserved,
      freedAfter: '-',
      statuses: `${statusLine(answers)}; tokens received per call: ${[...new Set(delivered.map((x) => x.tokens))].join(', ')}`,
    });
  }
  rows.push(await runawayWaves(f, upstream));
  await f.stop();
  return rows;
}

/**
 * 200 JSON calls answered with 2000 output tokens for max_tokens 20, in 10 waves of 20 (each after the previous
 * one ended), on a quota of 100,000. Overspend is counted two ways: units charged beyond the calls' admitted
 * bounds (their ADJUSTMENT events), per wave; and units consumed beyond the grant.
 */
async function runawayWaves(f: NexusProcess, upstream: string): Promise<Row> {
  const granted = 100_000;
  const t = await tenant(f, upstream, granted);
  const o = { maxTokens: 20, headers: produce(2000, 200) };
  const answers: Answer[] = [];
  const beyondBounds: bigint[] = [];
  let before = 0n;
  for (let wave = 0; wave < 10; wave++) {
    answers.push(...(await Promise.all(Array.from({ length: 20 }, () => callOnce(t.gateway(f), t.apiKey, o)))));
    await until(async () => (await period(t.accessId)).reserved === 0n && (await recorded(t.accessId)).length === answers.length, 30_000);
    const { rows: sum } = await db.query(
      `select coalesce(sum(units), 0) as units from usage_events where workspace_access_id = $1 and kind = 'ADJUSTMENT'`,
      [t.accessId],
    );
    const adjusted = BigInt((sum[0] as { units: string }).units);
    beyondBounds.push(adjusted - before);
    before = adjusted;
  }
  const delivered = answers.filter((x) => x.status === 200);
  const ids = new Set((await recorded(t.accessId)).map((r) => r.request_id));
  const p = await period(t.accessId);
  const later = beyondBounds.slice(1).reduce((a, b) => a + b, 0n);
  return {
    scenario: `runaway JSON in 10 waves of 20: 2000 tokens for max_tokens 20, ${granted} units`,
    delivered: delivered.length,
    recorded: delivered.filter((x) => ids.has(x.requestId!)).length,
    lost: delivered.filter((x) => !ids.has(x.requestId!)).length,
    charged: p.consumed,
    expected: `${2010n * BigInt(delivered.length)} (as reported)`,
    overspend: p.consumed > p.granted ? p.consumed - p.granted : 0n,
    reservedLeft: p.reserved,
    freedAfter: '-',
    statuses: `${statusLine(answers)}; units beyond the calls' bounds: first wave ${beyondBounds[0]}, waves 2 to 10 ${later} (${beyondBounds.slice(1).join(', ')}); answered per wave ${Array.from({ length: 10 }, (_, w) => answers.slice(w * 20, w * 20 + 20).filter((x) => x.status === 200).length).join(', ')}`,
  };
}

// ---- 7. the first wave on a model no process has seen ------------------------------------------------
/**
 * 2,000 JSON calls, 200 at a time (each of 200 clients calls again as soon as it has its answer), spread over two
 * processes, on a quota of 100,000 units (one unit a token), answered with 2,000 output tokens for max_tokens 20
 * after 200 ms. No answer has come back when the first 200 are admitted: the learned bound does not exist yet.
 * Reports what the period consumed, past its grant and as a share of it, and what calls were charged beyond the
 * bounds they were admitted at (the first wave's excess, whether or not the grant absorbed it).
 */
export async function firstWaveScenario(profile: 'openai' | 'anthropic', upstream: string, unbounded = false): Promise<Row> {
  // Unbounded: more places in the first wave than calls at a time, as if nothing held it.
  const env: Record<string, string> = unbounded ? { NEXUS_FIRST_WAVE_CALLS: '10000' } : {};
  const p = await nexus(DATABASE_URL, env);
  const q = await nexus(DATABASE_URL, env);
  const granted = 100_000;
  const t = await tenant(p, upstream, granted, 1000, profile);
  const o = { maxTokens: 20, headers: produce(2000, 200), anthropic: profile === 'anthropic' };
  const answers: Answer[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 200 }, async (_v, client) => {
      while (next < 2000) {
        next++;
        answers.push(await callOnce(t.gateway(client % 2 ? q : p), t.apiKey, o));
      }
    }),
  );
  await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
  const delivered = answers.filter((x) => x.status === 200);
  const ids = new Set((await recorded(t.accessId)).map((r) => r.request_id));
  const after = await period(t.accessId);
  const over = after.consumed > after.granted ? after.consumed - after.granted : 0n;
  // Charged beyond what the calls were admitted at (their ADJUSTMENT events): the calls admitted before any answer.
  const { rows: beyond } = await db.query(
    `select count(*) as calls, coalesce(sum(units), 0) as units from usage_events where workspace_access_id = $1 and kind = 'ADJUSTMENT'`,
    [t.accessId],
  );
  const past = beyond[0] as { calls: string; units: string };
  await p.stop();
  await q.stop();
  return {
    scenario: `first wave (${profile}${unbounded ? ', NEXUS_FIRST_WAVE_CALLS=10000' : ''}): 2000 JSON calls 200 at a time over 2 processes, 2000 tokens for max_tokens 20, ${granted} units`,
    delivered: delivered.length,
    recorded: delivered.filter((x) => ids.has(x.requestId!)).length,
    lost: delivered.filter((x) => !ids.has(x.requestId!)).length,
    charged: after.consumed,
    expected: `${2010n * BigInt(delivered.length)} (as reported)`,
    overspend: over,
    reservedLeft: after.reserved,
    freedAfter: '-',
    statuses:
      `${statusLine(answers)}; consumed past the grant: ${over} units (+${((Number(over) * 100) / granted).toFixed(1)}%); ` +
      `charged beyond their admitted bounds: ${past.units} units, by ${past.calls} calls`,
  };
}
