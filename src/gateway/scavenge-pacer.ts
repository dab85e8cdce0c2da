/**
 * The read buffers of a large body, collected as it goes. Node gives each read of a request's body (its HTTP parser
 * copies what it parsed into a buffer of its own) and each read of a spool file a fresh buffer, allocated outside
 * V8's heap. Nothing keeps them once they are passed on (upload.ts holds none), but their memory is freed only when V8
 * collects their small handles, and V8 starts a collection for external memory only after about 64 MiB more of it:
 * the first 100 MB upload through a process grew its resident set by 55 to 63 MB, which glibc then kept. A minor GC
 * (a scavenge of the young generation, where those handles are) every SCAVENGE_EVERY bytes of an upload's reads frees
 * them as it goes: 0.3 to 0.6 ms each, 25 for a 100 MB upload read in and sent out once (`npm run bench:upload`;
 * docs/modalities.md, "Uploads").
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** Bytes of an upload's reads between two scavenges. */
const SCAVENGE_EVERY = 8 << 20;

type Collect = (options: { type: 'minor'; execution: 'sync' }) => void;

/**
 * V8's `gc()`, with its options: the process's own when node runs with --expose-gc, otherwise taken from a context
 * made while the flag is set, and the flag unset again, so no other context gets it.
 */
function exposeGc(): Collect {
  const own = (globalThis as { gc?: unknown }).gc;
  if (typeof own === 'function') return own as Collect;
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as Collect;
  setFlagsFromString('--no-expose-gc');
  return gc;
}

/** Taken at the first scavenge: a process that never reads a large body never touches V8's flags. */
let collect: Collect | undefined;

/** One body's reads counted, a scavenge each SCAVENGE_EVERY bytes of them. */
export class ScavengePacer {
  private since = 0;

  constructor(private readonly every = SCAVENGE_EVERY) {}

  /** `bytes` more were read into buffers of their own. */
  read(bytes: number): void {
    this.since += bytes;
    if (this.since < this.every) return;
    this.since = 0;
    (collect ??= exposeGc())({ type: 'minor', execution: 'sync' });
  }
}
