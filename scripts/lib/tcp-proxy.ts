/**
 * A TCP proxy on 127.0.0.1 in front of another address (PostgreSQL, for the
 * outage tests): cut() closes every connection and refuses new ones, as a
 * database that went away would; restore() serves again on the same port.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Whether it serves (not cut). */
  up(): boolean;
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;

  async function listen(): Promise<void> {
    server = createServer((client) => {
      const upstream = connect(target.port, target.host);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  }

  async function stop(): Promise<void> {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    if (s) await new Promise((resolve) => s.close(resolve));
  }

  await listen();
  return {
    port,
    up: () => server !== undefined,
    cut: stop,
    restore: listen,
    close: stop,
  };
}
