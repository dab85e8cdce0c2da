/**
 * Is the event loop turning? Everything this process does (requests, timers, the signal handlers of
 * src/server.ts) waits for it: a loop held up by synchronous work, or by a chain of promises that never
 * leaves the microtask queue, answers nothing, not even /healthz or SIGTERM.
 *
 * - createEventLoopMonitor (one per app): a timer ticks every TICK_MS and measures how late it came
 *   (plus perf_hooks' monitorEventLoopDelay for the delays between ticks). Its lag feeds
 *   `nexus_event_loop_lag_seconds`; a lag beyond `blockedMs` is a stall, and /healthz answers 503
 *   `event_loop_blocked` while one lasts and for twice `blockedMs` after it.
 * - startLoopWatchdog (once per process, src/server.ts): a worker thread, which keeps running while the
 *   main thread is held up, reads the main thread's last tick from shared memory. When it is older than
 *   `blockedMs` it logs the stall (with the main thread's stack where the inspector can give it), and has
 *   the main thread drop its SIGTERM and SIGINT handlers until the loop turns again: a signal sent while
 *   the loop is blocked then ends the process by its default action, where a handler would never run.
 *   A signal is handled by the main thread's loop only (worker threads do not see them).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';

/** How often the loop's timer ticks (and the main thread's heartbeat is written). */
const TICK_MS = 100;
/** The lag reported is the longest of the last one to two windows of this length. */
const WINDOW_MS = 30_000;

interface Stall {
  /** How long the loop was held up, ms. */
  ms: number;
  /** When it turned again (ms since the epoch). */
  endedAt: number;
}

export function createEventLoopMonitor(options: { blockedMs: number; onStall?: (stall: Stall) => void }) {
  const { blockedMs } = options;
  const delay = monitorEventLoopDelay({ resolution: 20 });
  let lastTick = performance.now();
  let windowStart = Date.now();
  let windowMax = 0;
  let previousMax = 0;
  let lastStall: Stall | undefined;
  let timer: NodeJS.Timeout | undefined;

  function tick(): void {
    const now = performance.now();
    const lag = Math.max(0, now - lastTick - TICK_MS);
    lastTick = now;
    const wall = Date.now();
    if (wall - windowStart >= WINDOW_MS) {
      previousMax = Math.max(windowMax, delay.max / 1e6);
      windowMax = 0;
      windowStart = wall;
      delay.reset();
    }
    windowMax = Math.max(windowMax, lag);
    if (lag > blockedMs) {
      lastStall = { ms: Math.round(lag), endedAt: wall };
      options.onStall?.(lastStall);
    }
  }

  return {
    /** Starts measuring (once the app is built: its start-up's synchronous work is no stall). */
    start(): void {
      if (timer) return;
      lastTick = performance.now();
      delay.enable();
      timer = setInterval(tick, TICK_MS);
      timer.unref();
    },
    /** The longest the loop was held up lately (the last 30 to 60 s), seconds. */
    lagSeconds(): number {
      return Math.max(windowMax, previousMax, delay.max / 1e6) / 1000;
    },
    /** The stall that makes the process unhealthy now: one under way, or one that ended within twice `blockedMs`. */
    stall(): Stall | undefined {
      if (!timer) return undefined;
      const sinceTick = performance.now() - lastTick - TICK_MS;
      // Answered right after a stall, before the timer's late tick has run.
      if (sinceTick > blockedMs) return { ms: Math.round(sinceTick), endedAt: Date.now() };
      if (lastStall && Date.now() - lastStall.endedAt < 2 * blockedMs) return lastStall;
      return undefined;
    },
    close(): void {
      clearInterval(timer);
      delay.disable();
    },
  };
}

export type EventLoopMonitor = ReturnType<typeof createEventLoopMonitor>;

/** The name under which the main thread offers the watchdog its hook (called through the inspector). */
const HOOK = 'nexus.eventLoopBlocked';

/**
 * The watchdog thread, as CommonJS source (run with `eval`, so it needs no file of its own beside the
 * compiled ones, under tsx as under node). It writes its lines itself, synchronously: the main thread's
 * logger would not write while that thread is held up.
 */
const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const beat = new BigInt64Array(workerData.heartbeat);
const { blockedMs, pollMs, hook } = workerData;
const log = (level, fields) => {
  try {
    writeSync(1, JSON.stringify({ level, ...fields, timestamp: new Date().toISOString() }) + '\\n');
  } catch {}
};
/** Runs the main thread's hook between two of its statements (an inspector interrupt): drops its signal handlers, returns its stack. */
const interrupt = (done) => {
  let session;
  try {
    const inspector = require('node:inspector');
    session = new inspector.Session();
    session.connectToMainThread();
  } catch (err) {
    done(undefined);
    return;
  }
  const timer = setTimeout(() => finish(undefined), 2000);
  const finish = (value) => {
    clearTimeout(timer);
    try { session.disconnect(); } catch {}
    done(value);
  };
  session.post('Runtime.evaluate', { expression: 'globalThis[Symbol.for(' + JSON.stringify(hook) + ')]?.()', returnByValue: true }, (err, res) => {
    finish(err ? undefined : res && res.result && res.result.value);
  });
};
let stalled = false;
setInterval(() => {
  const since = Date.now() - Number(Atomics.load(beat, 0));
  if (since > blockedMs && !stalled) {
    stalled = true;
    // Logged once the interrupt has run: only then are the signal handlers gone, and a SIGTERM ends the process.
    interrupt((stack) => {
      if (typeof stack === 'string') {
        log('error', { msg: 'the event loop is blocked: no request, timer or signal handler runs; a SIGTERM or SIGINT now ends the process at once', blockedMs: since });
        log('error', { msg: 'where the blocked event loop is', stack });
      } else {
        log('error', { msg: 'the event loop is blocked: no request, timer or signal handler runs (the inspector could not interrupt it)', blockedMs: since });
      }
    });
  } else if (since <= blockedMs && stalled) {
    stalled = false;
    log('warn', { msg: 'the event loop turns again' });
  }
}, pollMs);
`;

/**
 * Starts the watchdog thread for this process (src/server.ts, once it listens). `onBlocked` runs on the
 * main thread, interrupting whatever holds it up, and returns what to log of where it was; the main thread
 * calls `onRuns` on its first tick after the stall.
 */
export function startLoopWatchdog(options: { blockedMs: number; onBlocked: () => void; onRuns: () => void }): { stop(): Promise<void> } {
  const heartbeat = new SharedArrayBuffer(8);
  const beat = new BigInt64Array(heartbeat);
  let blocked = false;
  const tick = () => {
    Atomics.store(beat, 0, BigInt(Date.now()));
    if (blocked) {
      blocked = false;
      options.onRuns();
    }
  };
  tick();
  const timer = setInterval(tick, TICK_MS);
  timer.unref();
  (globalThis as Record<symbol, unknown>)[Symbol.for(HOOK)] = () => {
    blocked = true;
    options.onBlocked();
    // The stack of the code that holds the loop, below this call (made from within it by the inspector).
    return new Error('event loop blocked').stack?.split('\n').slice(3, 30).join('\n');
  };
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: {
      heartbeat,
      blockedMs: options.blockedMs,
      pollMs: Math.min(250, Math.max(20, Math.floor(options.blockedMs / 4))),
      hook: HOOK,
    },
    // Not the main thread's --import hooks (tsx) nor its options: the watchdog is plain CommonJS.
    execArgv: [],
    stdout: false,
    stderr: false,
  });
  worker.unref();
  return {
    async stop() {
      clearInterval(timer);
      delete (globalThis as Record<symbol, unknown>)[Symbol.for(HOOK)];
      await worker.terminate();
    },
  };
}
