// @ts-check
/**
 * What V8's garbage collection costs a call by how many calls are in flight, for comparing node/V8 flags without a
 * database or a network (docs/performance.md, "Memory"). It allocates as a gateway call does, about 30 KB of
 * short-lived objects a call on a live heap of about 45 MB, and keeps the last IN_FLIGHT calls' objects alive, as a
 * process keeps the calls under way: a few hundred while it keeps up, thousands while it carries a backlog, when
 * scavenges promote them and the old generation fills with their garbage. Prints the CPU per call
 * (`process.cpuUsage`), the resident set and V8's heap at the end.
 *
 *   node --max-semi-space-size=16 --heap-growing-percent=30 scripts/gc-growth.mjs [IN_FLIGHT=200] [CALLS=300000]
 */
const inFlight = Number(process.argv[2] ?? 200);
const calls = Number(process.argv[3] ?? 300_000);

/** The process's own long-lived objects (caches, module state). */
const live = [];
for (let i = 0; i < 450_000; i++) live.push({ id: i, name: `k${i}`, tags: [i, i + 1], at: new Date(0) });

/** One call's objects: its headers, its body's text, and what reading it makes. */
function oneCall(n) {
  const call = { headers: /** @type {string[]} */ ([]), body: '', parts: /** @type {object[]} */ ([]) };
  call.body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(200) }] });
  for (let j = 0; j < 40; j++) call.headers.push(`h${j}`, String(n * j));
  for (let j = 0; j < 60; j++) call.parts.push({ j, s: `p${j}${n}`, a: [j, n] });
  return call;
}

const underWay = new Array(inFlight);
const start = process.cpuUsage();
for (let n = 0; n < calls; n++) underWay[n % inFlight] = oneCall(n);
const used = process.cpuUsage(start);
const memory = process.memoryUsage();
console.log(
  JSON.stringify({
    flags: process.execArgv.join(' '),
    inFlight,
    cpuUsPerCall: Number(((used.user + used.system) / calls).toFixed(2)),
    rssMiB: Math.round(memory.rss / 1048576),
    heapTotalMiB: Math.round(memory.heapTotal / 1048576),
    liveObjects: live.length,
  }),
);
