/**
 * Loaded into a Nexus child process by the tests of a stalled event loop (node --import, through
 * NODE_OPTIONS): nothing of it is in the server. SIGUSR2 holds the main thread's event loop up for
 * BLOCK_LOOP_MS (default a minute) with a chain of promises that never leaves the microtask queue, as
 * a loop of statements on the embedded database once did.
 */
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  process.on('SIGUSR2', () => {
    const until = Date.now() + Number(process.env.BLOCK_LOOP_MS ?? 60_000);
    const spin = () => {
      if (Date.now() < until) return Promise.resolve().then(spin);
    };
    void spin();
  });
}
