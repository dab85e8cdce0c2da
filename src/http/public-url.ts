/**
 * Where clients reach this Nexus: NEXUS_PUBLIC_URL when set, else the address the server listens on. That
 * address is known only once it listens (port 0 picks a free one), so the running app holds it, not the Config.
 *
 * A request's Host and X-Forwarded-Host/-Proto headers are what its sender says: believed only from a proxy
 * NEXUS_TRUST_PROXY trusts (the connection's peer address is checked), and only when NEXUS_PUBLIC_URL is unset.
 * Otherwise a hostile Host would be written into the URLs Nexus hands out (and a shared cache would keep them).
 */
import type { IncomingMessage } from 'node:http';
import { BlockList, isIPv4 } from 'node:net';
import type { Config } from '../config.js';

/** A Host header worth naming a server by: a host name, IPv4 or [IPv6] address, and an optional port. */
const HOST_HEADER = /^(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

export interface PublicUrl {
  /** The configured or listening origin (no trailing slash): what the startup line names. */
  get(): string;
  /** The server listens at `url`: the public URL unless NEXUS_PUBLIC_URL names another. */
  listeningAt(url: string): void;
  /**
   * What the URLs in an answer to `req` start with (gatewayBaseUrl, webhookUrl, Link, the contract's server):
   * NEXUS_PUBLIC_URL; else, from a trusted proxy, the origin it forwarded (X-Forwarded-Proto and
   * X-Forwarded-Host, else Host); else the listening address.
   */
  forRequest(req: IncomingMessage): string;
}

/** The first value of a header a chain of proxies may have appended to (`a, b`). */
function firstOf(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const comma = v.indexOf(',');
  return (comma < 0 ? v : v.slice(0, comma)).trim() || undefined;
}

/** Whether a peer at this address is a proxy whose forwarding headers are believed. */
function trustOf(trustProxy: Config['trustProxy']): (address: string | undefined) => boolean {
  if (trustProxy === true) return () => true;
  if (trustProxy === false || trustProxy.length === 0) return () => false;
  const proxies = new BlockList();
  for (const range of trustProxy) {
    const slash = range.lastIndexOf('/');
    const address = range.slice(0, slash);
    proxies.addSubnet(address, Number(range.slice(slash + 1)), isIPv4(address) ? 'ipv4' : 'ipv6');
  }
  // An IPv4 peer of a dual-stack socket comes as ::ffff:a.b.c.d, which BlockList matches against IPv4 ranges too.
  return (address) => address !== undefined && proxies.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');
}

export function createPublicUrl(config: Pick<Config, 'publicUrl' | 'host' | 'port' | 'trustProxy'>): PublicUrl {
  // Before the server listens (an app built but not served): the configured address.
  let listening = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
  const trusted = trustOf(config.trustProxy);
  return {
    get: () => config.publicUrl ?? listening,
    listeningAt(url: string) {
      listening = url;
    },
    forRequest(req: IncomingMessage): string {
      if (config.publicUrl) return config.publicUrl;
      if (!trusted(req.socket.remoteAddress)) return listening;
      const host = firstOf(req.headers['x-forwarded-host']) ?? req.headers.host;
      if (!host || !HOST_HEADER.test(host)) return listening;
      const forwardedProto = firstOf(req.headers['x-forwarded-proto'])?.toLowerCase();
      const tls = Boolean((req.socket as { encrypted?: boolean }).encrypted);
      const scheme = forwardedProto === 'https' || forwardedProto === 'http' ? forwardedProto : tls ? 'https' : 'http';
      return `${scheme}://${host.toLowerCase()}`;
    },
  };
}
