/**
 * `npx tsx scripts/profile-summary.ts <file.cpuprofile> [from s] [to s]`: where a V8 CPU profile's busy time went
 * (one that `BENCH_PROFILE=1 npm run bench` wrote to bench-profiles/, or node's --cpu-prof), as shares of the
 * samples that were not idle between `from` and `to` seconds of the profile (default: all of it; a bench's Nexus
 * process spends its first seconds starting, and its per-second busy share, printed first, shows where its phases
 * begin). Printed: the share of each source (a package of node_modules, a file of Nexus's dist/ or src/, node's
 * own modules, the system calls and the garbage collector), the functions that took the most time themselves,
 * and what called the socket writes (`writev`: the kernel's work of sending, counted in the process).
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, fromArg, toArg] = process.argv.slice(2);
if (!file) throw new Error('Usage: npx tsx scripts/profile-summary.ts <file.cpuprofile> [from s] [to s]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const from = Number(fromArg ?? 0) * 1e6;
const to = toArg === undefined ? Infinity : Number(toArg) * 1e6;

const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const isIdle = (n: ProfileNode) => n.callFrame.functionName === '(idle)';
const name = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${f.url.replace(/.*\//, '')}:${f.lineNumber + 1}`;

/** A frame's source: a package, a file of Nexus, node's module, or what V8 names (the GC, a system call). */
function sourceOf(f: CallFrame): string {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f.url);
  if (pkg) return `package ${pkg[1]}`;
  const own = /\/(?:dist|src)\/(.+)$/.exec(f.url);
  if (own && !f.url.startsWith('node:')) return `nexus ${own[1]}`;
  return f.url || f.functionName;
}

const perSecond: { all: number; busy: number }[] = [];
const bySource = new Map<string, number>();
const bySelf = new Map<string, number>();
const writers = new Map<string, number>();
const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
let t = 0;
let busy = 0;
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i]!;
  const node = nodes.get(profile.samples[i]!)!;
  const second = (perSecond[Math.floor(t / 1e6)] ??= { all: 0, busy: 0 });
  second.all++;
  if (isIdle(node)) continue;
  second.busy++;
  if (t < from || t >= to) continue;
  busy++;
  add(bySource, sourceOf(node.callFrame));
  add(bySelf, name(node.callFrame));
  if (node.callFrame.functionName === 'writev' || node.callFrame.functionName === 'writeBuffer') {
    // The first caller that is not node's stream machinery: an answer's end, undici's request, pg's query.
    let at = parent.get(node.id);
    while (at !== undefined && /^node:|^$/.test(nodes.get(at)!.callFrame.url)) at = parent.get(at);
    add(writers, at === undefined ? '(unknown)' : name(nodes.get(at)!.callFrame));
  }
}

const share = (n: number) => `${((100 * n) / busy).toFixed(1).padStart(5)}%`;
const top = (m: Map<string, number>, count: number) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([k, v]) => `  ${share(v)}  ${k}`)
    .join('\n');
console.log(`Busy share per second: ${perSecond.map((s, i) => `${i}:${s ? Math.round((100 * s.busy) / s.all) : 0}`).join(' ')}`);
console.log(`\n${busy} busy samples between ${from / 1e6} s and ${to === Infinity ? 'the end' : `${to / 1e6} s`}\n`);
console.log(`By source:\n${top(bySource, 30)}\n`);
console.log(`By function (its own time):\n${top(bySelf, 30)}\n`);
console.log(`Socket writes, by the caller that made them:\n${top(writers, 8)}`);
