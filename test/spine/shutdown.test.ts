import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

it('on shutdown stops accepting, finishes the request in flight, then closes', async () => {
  const { port } = new URL(t.url);
  const body = JSON.stringify({ name: 'in-flight' });
  const socket = connect(Number(port), '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  let answer = '';
  socket.on('data', (d: Buffer) => (answer += d.toString('utf8')));
  const ended = new Promise((r) => socket.once('end', r));
  socket.write(
    `POST /admin/v1/workspaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_ROOT_KEY}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
  );
  // The request is in flight (headers read, body pending) when shutdown starts.
  while (t.nexus.inflight.count === 0) await new Promise((r) => setTimeout(r, 5));
  let closed = false;
  const shutdown = t.running.shutdown().then(() => (closed = true));
  await new Promise((r) => setTimeout(r, 100));
  expect(closed).toBe(false);
  await expect(fetch(`${t.url}/healthz`)).rejects.toThrow();

  socket.write(body.slice(5));
  await ended;
  expect(answer).toMatch(/^HTTP\/1\.1 201/);
  expect(answer).toContain('"name":"in-flight"');
  await shutdown;
  expect(closed).toBe(true);
});
