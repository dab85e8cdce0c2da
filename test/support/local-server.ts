/**
 * The test servers' plumbing: listen on an ephemeral port of 127.0.0.1, close
 * with the connections still open, and a URL where nothing listens.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on an ephemeral port of 127.0.0.1; returns the server's base URL. */
export async function listenLocal(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes the server, cutting the connections still open (keep-alive, hung requests). */
export function closeServer(server: Server | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** A URL on 127.0.0.1 where nothing listens (the port was bound, then released). */
export async function refusedUrl(): Promise<string> {
  const server = createServer();
  const url = await listenLocal(server);
  await closeServer(server);
  return url;
}
