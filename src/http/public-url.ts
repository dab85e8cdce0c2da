/**
 * Where clients reach this Nexus: NEXUS_PUBLIC_URL when set, else the address the
 * server listens on. That address is known only once it listens (port 0 picks a free
 * one), so the running app holds it, not the Config.
 */
import type { IncomingMessage } from 'node:http';
import type { Config } from '../config.js';

/** A Host header worth naming a server by: a host name, IPv4 or [IPv6] address, and an optional port. */
const HOST_HEADER = /^(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

export interface PublicUrl {
  /** gatewayBaseUrl, webhookUrl and Link headers start with this (no trailing slash). */
  get(): string;
  /** The server listens at `url`: the public URL unless NEXUS_PUBLIC_URL names another. */
  listeningAt(url: string): void;
  /**
   * The server a reader of the contract or the API reference should call: NEXUS_PUBLIC_URL,
   * else the origin the request was sent to (its Host header), so "Test request" reaches
   * this server whatever address the reader used.
   */
  forRequest(req: IncomingMessage): string;
}

export function createPublicUrl(config: Pick<Config, 'publicUrl' | 'host' | 'port'>): PublicUrl {
  // Before the server listens (an app built but not served): the configured address.
  let listening = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
  return {
    get: () => config.publicUrl ?? listening,
    listeningAt(url: string) {
      listening = url;
    },
    forRequest(req: IncomingMessage): string {
      if (config.publicUrl) return config.publicUrl;
      const host = req.headers.host;
      if (!host || !HOST_HEADER.test(host)) return listening;
      const tls = Boolean((req.socket as { encrypted?: boolean }).encrypted);
      return `${tls ? 'https' : 'http'}://${host.toLowerCase()}`;
    },
  };
}
