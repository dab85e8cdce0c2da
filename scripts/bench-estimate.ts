/**
 * `npm run bench:estimate`: how tight the input bound is (src/protocols/input-estimate.ts) and what it costs.
 *
 * Over the corpus of test/fixtures/input-corpus.ts (English, code, CJK, JSON, base64, digits, whitespace), a
 * chat request of four messages, its third the sample: per kind, the body's bytes (the bound before the
 * estimate), the tokens the model's chat template makes of it (actual: o200k_base for gpt-4o, cl100k_base for
 * gpt-4, both as gpt-tokenizer encodes a chat), and the bound each model's call is admitted at, with bound /
 * actual. A Claude model's bound is shown against the o200k count (Claude's tokenizer is not public), and a
 * Gemini call's bound of the text alone against Gemma 3's count of it (recorded in the corpus).
 *
 * Then the estimate's cost for a 2 KB English prompt (a chat request), in µs: the walk, the count and
 * the bound on a parsed body, each of BENCH_ESTIMATE_PROMPTS (default 2,000) different prompts once per
 * round, BENCH_ESTIMATE_ROUNDS rounds (default 15, at least 10, after 2 to warm up); the median round is
 * printed with the interquartile range of the rounds, with gpt-tokenizer's countTokens of the same prompts and
 * the whole prepareCall (parse, caps, bound) beside it. The estimate's figure is checked against TARGET_US. Then 2 KB CJK prompts of random common characters (every run between full stops a piece to merge,
 * none seen before). Last, 64 KiB of random base64 sent as text, whose pieces are mostly outside the
 * vocabulary: what the estimate costs (its merges bounded) against countTokens, in ms.
 */
import { randomBytes } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import * as gpt4 from 'gpt-tokenizer/model/gpt-4';
import * as gpt4o from 'gpt-tokenizer/model/gpt-4o';
import o200kEncoding from 'gpt-tokenizer/encoding/o200k_base';
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { BASE_TOKENS, FOREIGN, InputTally } from '../src/protocols/input-estimate.js';
import { inspectorFor, prepareCall } from '../src/protocols/inspectors.js';
import { openai } from '../src/protocols/openai.js';
import { corpus, englishPrompt } from '../test/fixtures/input-corpus.js';

const PROMPTS = Number(process.env.BENCH_ESTIMATE_PROMPTS ?? 2000);
const ROUNDS = Math.max(10, Number(process.env.BENCH_ESTIMATE_ROUNDS ?? 15));
/** What a 2 KB English prompt's estimate may cost, in µs of CPU (docs/pricing.md "Input bounds"). */
const TARGET_US = 20;
const AS_TEXT = { disallowedSpecial: new Set<string>() };
/** gpt-tokenizer's o200k count, special-token strings counted as text. */
const o200kTokens = (text: string) => (text ? o200kEncoding.countTokens(text, AS_TEXT) : 0);
const CAPS = { maxOutputTokens: 1000, clamp: true };

const chat = inspectorFor('openai', 'POST', 'v1/chat/completions')!;
const messages = inspectorFor('anthropic', 'POST', 'v1/messages')!;
type Message = { role: 'system' | 'user' | 'assistant'; content: string };
const conversation = (text: string): Message[] => [
  { role: 'system', content: 'You are a careful assistant. Answer briefly.' },
  { role: 'user', content: 'I will paste a text.' },
  { role: 'user', content: text },
  { role: 'user', content: 'Summarise it in two sentences.' },
];
const boundOf = (on: typeof chat, body: object) => Number(prepareCall(on, Buffer.from(JSON.stringify(body)), CAPS).inputBound);
const ratio = (a: number, b: number) => (a / b).toFixed(2);

console.log(
  `node ${process.version}, ${cpus().length} CPUs, load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log('\nInput bound / actual, a chat of four messages, the third the sample:\n');
console.log(
  '| kind | bytes | gpt-4o actual | gpt-4o bound | bound/actual | bytes/actual | gpt-4 actual | gpt-4 bound | bound/actual | claude bound / o200k |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const { kind, text } of corpus()) {
  const turns = conversation(text);
  const bytes = Buffer.byteLength(JSON.stringify({ model: 'gpt-4o', messages: turns }));
  const actual4o = gpt4o.encodeChat(turns, 'gpt-4o', AS_TEXT).length;
  const bound4o = boundOf(chat, { model: 'gpt-4o', messages: turns });
  const actual4 = gpt4.encodeChat(turns, 'gpt-4', AS_TEXT).length;
  const bound4 = boundOf(chat, { model: 'gpt-4', messages: turns });
  const claude = boundOf(messages, { model: 'claude-sonnet-4-5', max_tokens: 10, system: turns[0]!.content, messages: turns.slice(1) });
  console.log(
    `| ${kind} | ${bytes} | ${actual4o} | ${bound4o} | ${ratio(bound4o, actual4o)} | ${ratio(bytes, actual4o)} | ${actual4} | ${bound4} | ${ratio(bound4, actual4)} | ${ratio(claude, actual4o)} |`,
  );
}

console.log("\nA Gemini call's bound on the text alone (no structure) / Gemma 3's count of it (the corpus's `gemma`):\n");
console.log('| kind | bytes | o200k | bound | Gemma 3 | bound / Gemma 3 |');
console.log('|---|---|---|---|---|---|');
for (const { kind, text, gemma } of corpus()) {
  const tally = new InputTally(() => undefined);
  tally.text(text);
  const bound = tally.bound(FOREIGN) - BASE_TOKENS;
  console.log(`| ${kind} | ${Buffer.byteLength(text)} | ${o200kTokens(text)} | ${bound} | ${gemma} | ${ratio(bound, gemma)} |`);
}

// 2 KB prompts, each different (the tokenizer's merge cache sees text it has not seen).
const prose = englishPrompt(8192);
const prompts = Array.from({ length: PROMPTS }, (_, i) => {
  const at = prose.indexOf(' ', (i * 37) % 4096) + 1;
  // As a parsed request holds it: one flat string, not a concatenation.
  return JSON.parse(JSON.stringify(`${i} ${prose.slice(at, at + 2040)}`)) as string;
});
const bodies = prompts.map((p) => ({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: p }], max_tokens: 200 }));
const raws = bodies.map((b) => Buffer.from(JSON.stringify(b)));

/**
 * µs per prompt of each run's median round, in CPU time (this process's, user and system: on a host shared
 * with other work, wall time also counts the time the process waited for a CPU), with the first and third
 * quartiles of its rounds' CPU time, and in wall time. The runs take turns round by round, so that a change in
 * the host's load weighs on each alike.
 */
interface Timed {
  cpu: number;
  q1: number;
  q3: number;
  wall: number;
}
function medians(runs: Record<string, () => void>): Record<string, Timed> {
  const cpu: Record<string, number[]> = {};
  const wall: Record<string, number[]> = {};
  for (let r = 0; r < ROUNDS + 2; r++) {
    for (const [name, run] of Object.entries(runs)) {
      const started = process.hrtime.bigint();
      const used = process.cpuUsage();
      run();
      const { user, system } = process.cpuUsage(used);
      if (r < 2) continue;
      (wall[name] ??= []).push(Number(process.hrtime.bigint() - started) / 1000 / PROMPTS);
      (cpu[name] ??= []).push((user + system) / PROMPTS);
    }
  }
  return Object.fromEntries(
    Object.keys(runs).map((name) => {
      const q = quartiles(cpu[name]!);
      return [name, { cpu: q.median, q1: q.q1, q3: q.q3, wall: quartiles(wall[name]!).median }];
    }),
  );
}
/** The median and the first and third quartiles of `xs` (linear interpolation between the nearest ranks). */
function quartiles(xs: number[]): { q1: number; median: number; q3: number } {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (p: number) => {
    const i = p * (sorted.length - 1);
    const below = Math.floor(i);
    return sorted[below]! + (sorted[Math.min(below + 1, sorted.length - 1)]! - sorted[below]!) * (i - below);
  };
  return { q1: at(0.25), median: at(0.5), q3: at(0.75) };
}
const µs = (m: Timed) => `${m.cpu.toFixed(1)} µs CPU (IQR ${m.q1.toFixed(1)}-${m.q3.toFixed(1)}; ${m.wall.toFixed(1)} µs wall)`;

/**
 * The count as the estimate made it before o200k-split.ts: every piece cut by o200k's expression and looked up
 * in the vocabulary, merges remembered. The baseline the count is compared with, in the same run.
 */
const vocabulary = (o200kEncoding as unknown as { bytePairEncodingCoreProcessor: { bytePairStringRankEncoder: Map<string, number> } })
  .bytePairEncodingCoreProcessor.bytePairStringRankEncoder;
const expression = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'gu');
const expressionMerged = new Map<string, number>();
function expressionCount(text: string): number {
  let tokens = 0;
  expression.lastIndex = 0;
  for (let match = expression.exec(text); match !== null; match = expression.exec(text)) {
    const piece = match[0];
    if (vocabulary.has(piece)) tokens++;
    else {
      let count = expressionMerged.get(piece);
      if (count === undefined) expressionMerged.set(piece, (count = o200kTokens(piece)));
      tokens += count;
    }
  }
  return tokens;
}

let sink = 0;
const timed = medians({
  estimate: () => {
    for (const body of bodies) {
      const tally = new InputTally(openai.inlineImage);
      sink += tally.bound(chat.input(body, tally, body.model));
    }
  },
  count: () => {
    for (const p of prompts) {
      const tally = new InputTally(openai.inlineImage);
      tally.text(p);
      sink += tally.textTokens;
    }
  },
  previous: () => {
    for (const p of prompts) sink += expressionCount(p);
  },
  // gpt-tokenizer's own count, with its merge memory on (the estimate turns it off): a fresh encoder.
  countTokens: () => {
    for (const p of prompts) sink += gpt4o.countTokens(p, AS_TEXT);
  },
  whole: () => {
    for (const raw of raws) sink += Number(prepareCall(chat, raw, CAPS).inputBound);
  },
});
const { estimate, count, previous, countTokens, whole } = timed;
const kb = Buffer.byteLength(prompts[0]!) / 1024;
console.log(
  `\nA ${kb.toFixed(1)} KiB English prompt (${PROMPTS} different ones, median of ${ROUNDS} rounds and their IQR, the runs taking turns; load now ${loadavg()[0]!.toFixed(2)}):`,
);
console.log(`  estimate (walk, count, bound):     ${µs(estimate!)}, ${((kb * 1024) / estimate!.cpu).toFixed(0)} MB/s`);
console.log(`  its count of the prompt alone:     ${µs(count!)}`);
console.log(`  the count by o200k's expression:   ${µs(previous!)} (every piece cut by the expression, looked up)`);
console.log(`  gpt-tokenizer's countTokens alone: ${µs(countTokens!)}`);
console.log(`  prepareCall (parse, caps, bound):  ${µs(whole!)}`);
console.log(
  `  count / expression's count: ${ratio(count!.cpu, previous!.cpu)} CPU; estimate / (estimate with the expression's count): ${ratio(
    estimate!.cpu,
    estimate!.cpu - count!.cpu + previous!.cpu,
  )}`,
);
console.log(
  `  target: the estimate at most ${TARGET_US} µs CPU: ${estimate!.cpu <= TARGET_US ? 'met' : 'NOT met'} in this run (median ${estimate!.cpu.toFixed(1)} µs, third quartile ${estimate!.q3.toFixed(1)} µs)`,
);

// 2 KB of CJK never seen before (random common characters, a full stop every 12 to 40): each run between
// punctuation a piece to merge.
const HAN =
  '的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴';
let seed = 11;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const cjkPrompts = Array.from({ length: PROMPTS }, () => {
  let text = '';
  while (Buffer.byteLength(text) < 2048) {
    for (let n = 12 + Math.floor(rand() * 28); n > 0; n--) text += HAN[Math.floor(rand() * HAN.length)];
    text += '。';
  }
  return { model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }], max_tokens: 200 };
});
// One pass: a second would find the runs remembered.
const cjkUsed = process.cpuUsage();
for (const body of cjkPrompts) {
  const tally = new InputTally(openai.inlineImage);
  sink += tally.bound(chat.input(body, tally, body.model));
}
const cjkCpu = process.cpuUsage(cjkUsed);
const cjk = (cjkCpu.user + cjkCpu.system) / PROMPTS;
console.log(`\nA 2 KiB CJK prompt of runs never seen before (${PROMPTS} different ones, once): estimate ${cjk.toFixed(1)} µs CPU`);

// Text that is mostly pieces outside the vocabulary, each new: random base64, 64 KiB, pasted as text.
const blobs = Array.from({ length: 5 }, () => randomBytes(48 * 1024).toString('base64'));
const once = (run: (text: string) => number) => {
  const started = process.hrtime.bigint();
  for (const blob of blobs) sink += run(blob);
  return Number(process.hrtime.bigint() - started) / 1e6 / blobs.length;
};
const blobBody = (text: string) => ({ model: 'gpt-4o', messages: [{ role: 'user', content: text }] });
const blobEstimate = once((text) => {
  const tally = new InputTally(openai.inlineImage);
  return tally.bound(chat.input(blobBody(text), tally, 'gpt-4o'));
});
const blobCount = once((text) => o200kTokens(text));
console.log(`\n64 KiB of random base64 as text (5 different ones, each once):`);
console.log(`  estimate: ${blobEstimate.toFixed(1)} ms; gpt-tokenizer's countTokens: ${blobCount.toFixed(1)} ms`);
if (sink < 0) console.log(sink);
