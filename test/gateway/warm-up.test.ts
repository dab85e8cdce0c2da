import { expect, it } from 'vitest';
import { warmHttp } from '../../src/warm-http.js';

/** The process's TCP handles: servers and sockets (node's own count). */
const tcpHandles = () => process.getActiveResourcesInfo().filter((r) => r.startsWith('TCP')).length;

it("runs a call's HTTP over the loopback and leaves no socket or server open after", async () => {
  const before = tcpHandles();
  const began = performance.now();
  await warmHttp();
  expect(performance.now() - began).toBeLessThan(30_000);
  // Its server and the client's connections are closed (their handles go once the sockets' close has run): nothing
  // of it is left to hold a port or keep the process alive.
  await expect.poll(tcpHandles, { timeout: 5000 }).toBe(before);
});
