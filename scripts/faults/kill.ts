/** `npm run faults`, scenario 1: a process killed while streams start through it. */
import {
  BODY_BYTES,
  callOnce,
  nexus,
  period,
  produce,
  recorded,
  sleep,
  statusLine,
  tenant,
  until,
  type Answer,
  type Row,
} from './common.js';

// ---- 1. kill ----------------------------------------------------------------------------------
const KILL_ROUNDS = Number(process.env.FAULTS_KILL_ROUNDS ?? 3);
/** Where a round's kill falls, after the first stream started. */
const KILL_BANDS_MS: [number, number][] = [
  [500, 1000],
  [1000, 2000],
  [2000, 3500],
];
/** The snapshot's documented window: a call younger than this at the kill may go uncharged. */
const LOSS_WINDOW_MS = 500;

/**
 * KILL_ROUNDS rounds: streams start on process A, one every 50 ms; A is killed at a random moment
 * after the first one started (0.5 to 1 s, 1 to 2 s, 2 to 3.5 s in turn), so at the kill the
 * youngest streams are a few ms old, many are within their first second, others older. Process B reclaims A's lease; then A's data
 * dir gets a new process, which charges nothing again.
 */
export async function killScenario(upstream: string): Promise<Row> {
  const b = await nexus();
  const t = await tenant(b, upstream, 100_000_000);
  const stream = { stream: true, maxTokens: 400, headers: produce(400, 20) };
  const answers: Answer[] = [];
  const ages: number[] = [];
  const killMoments: string[] = [];
  let charged = 0n;
  let again = 0n;
  let freedAfterMs = 0;
  for (let round = 0; round < KILL_ROUNDS; round++) {
    const a = await nexus();
    const started = Date.now();
    const calls: Promise<Answer>[] = [];
    // Random within a band per round: the first second of the first calls, then later ones.
    const [from, to] = KILL_BANDS_MS[round % KILL_BANDS_MS.length]!;
    const killAfter = from + Math.floor(Math.random() * (to - from));
    killMoments.push(`${(killAfter / 1000).toFixed(1)} s`);
    const starting = (async () => {
      for (let i = 0; i < 60 && Date.now() - started < killAfter; i++) {
        calls.push(callOnce(t.gateway(a), t.apiKey, stream));
        await sleep(50);
      }
    })();
    await sleep(killAfter);
    await a.kill();
    const killedAt = Date.now();
    await starting;
    const round_ = await Promise.all(calls);
    for (const x of round_) ages.push(x.headersAt === undefined ? -1 : killedAt - x.headersAt);
    answers.push(...round_);
    const freed = await until(async () => (await period(t.accessId)).reserved === 0n, 120_000);
    freedAfterMs = Math.max(freedAfterMs, freed === null ? Infinity : Date.now() - killedAt);
    charged = (await period(t.accessId)).consumed;
    // A process starts on the killed one's database again: nothing of its calls is charged twice.
    const restarted = await nexus();
    await sleep(2000);
    again += (await period(t.accessId)).consumed - charged;
    await restarted.stop();
  }
  const after = await period(t.accessId);
  const records = new Map((await recorded(t.accessId)).map((r) => [r.request_id, r]));
  const isDelivered = (x: Answer) => x.status === 200 && x.tokens > 0;
  const delivered = answers.filter(isDelivered);
  const uncharged = answers
    .map((x, i) => ({ x, age: ages[i]! }))
    .filter(({ x }) => isDelivered(x) && !(BigInt(records.get(x.requestId!)?.quota_units ?? 0) > 0n));
  const inWindow = uncharged.filter(({ age }) => age < LOSS_WINDOW_MS).length;
  const received = delivered.reduce((sum, x) => sum + BigInt(x.tokens), 0n);
  const deliveredAges = answers.flatMap((x, i) => (isDelivered(x) ? [ages[i]!] : []));
  const youngest = Math.min(...deliveredAges);
  // The rule for a call cut by its process's death: its input bound and the output it delivered, less what
  // it streamed after the last snapshot (at most its window).
  const expected = BODY_BYTES(stream) * BigInt(delivered.length) + received;
  await b.stop();
  return {
    scenario: `kill: SIGKILL at a random moment (${killMoments.join(', ')} after the first of 60 streams began, one every 50 ms; ${KILL_ROUNDS} rounds), restart`,
    delivered: delivered.length,
    recorded: delivered.filter((x) => records.has(x.requestId!)).length,
    lost: uncharged.length,
    charged: after.consumed,
    expected: `${expected} (delivered; ${expected - charged} streamed after the last snapshot)`,
    overspend: after.consumed > after.granted ? after.consumed - after.granted : 0n,
    reservedLeft: after.reserved,
    freedAfter: freedAfterMs === Infinity ? '>120 s' : `${(freedAfterMs / 1000).toFixed(1)} s`,
    statuses:
      `${statusLine(answers)}; delivered but never charged: ${uncharged.length} (${uncharged.length - inWindow} answering for ${LOSS_WINDOW_MS} ms or more at the kill, ` +
      `${inWindow} younger${inWindow ? `: ${uncharged.map(({ age }) => `${age} ms`).join(', ')}` : ''}); ${deliveredAges.filter((age) => age < 1000).length} of the delivered were in their first second at the kill, the youngest ${youngest} ms; ` +
      `${[...records.values()].filter((r) => r.error_code === 'gateway_lost').length} gateway_lost; charged again after restarts: ${again}`,
  };
}
