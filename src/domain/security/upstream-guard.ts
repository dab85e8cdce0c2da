/**
 * Server-side request forgery guard for provider base URLs. A connection's
 * baseUrl must be http(s), carry no credentials, query or fragment, and (unless
 * NEXUS_ALLOW_PRIVATE_UPSTREAMS=true) must not resolve to loopback, private,
 * link-local, shared, multicast or cloud metadata addresses. The check runs when
 * the URL is saved and again on every connection (guardedLookup), so a name
 * that re-resolves to an internal address later (DNS rebinding) is still refused.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP, isIPv4, isIPv6 } from 'node:net';
import { AppError } from '../../errors.js';

const MAX_URL_LENGTH = 2048;
const DNS_TIMEOUT_MS = 5000;

interface Range {
  base: bigint;
  bits: number;
}

function parseIPv4(ip: string): bigint | null {
  if (!isIPv4(ip)) return null;
  return ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

/** 128-bit value of an IPv6 address (zone id ignored; embedded dotted IPv4 allowed). */
function parseIPv6(input: string): bigint | null {
  const ip = input.replace(/%.*$/, '');
  if (!isIPv6(ip)) return null;
  let text = ip;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = parseIPv4(dotted[1]!)!;
    text = text.slice(0, -dotted[1]!.length) + `${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const missing = 8 - headParts.length - tailParts.length;
  const parts = tail === undefined ? headParts : [...headParts, ...Array<string>(missing).fill('0'), ...tailParts];
  if (parts.length !== 8) return null;
  return parts.reduce((acc, part) => (acc << 16n) | BigInt(parseInt(part, 16)), 0n);
}

function range4(cidr: string): Range {
  const [ip, bits] = cidr.split('/') as [string, string];
  return { base: parseIPv4(ip)!, bits: Number(bits) };
}

function range6(cidr: string): Range {
  const [ip, bits] = cidr.split('/') as [string, string];
  return { base: parseIPv6(ip)!, bits: Number(bits) };
}

function inRange(value: bigint, range: Range, width: number): boolean {
  const shift = BigInt(width - range.bits);
  return value >> shift === range.base >> shift;
}

/** Not reachable on the public internet, or where cloud metadata services live. */
const BLOCKED_V4: Range[] = [
  '0.0.0.0/8', // "this network", 0.0.0.0 reaches the local host
  '10.0.0.0/8',
  '100.64.0.0/10', // shared address space (CGNAT; Alibaba metadata 100.100.100.200)
  '127.0.0.0/8',
  '169.254.0.0/16', // link-local (AWS/GCP/Azure metadata 169.254.169.254)
  '172.16.0.0/12',
  '192.0.0.0/24', // IETF protocol assignments (Oracle metadata 192.0.0.192)
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and 255.255.255.255
  '168.63.129.16/32', // Azure wire server
].map(range4);

const BLOCKED_V6: Range[] = [
  '::/128',
  '::1/128',
  '64:ff9b:1::/48', // local-use NAT64
  '100::/64', // discard-only
  '2001::/23', // IETF protocol assignments (Teredo, ORCHID, ...)
  '2001:db8::/32', // documentation
  'fc00::/7', // unique local (AWS metadata fd00:ec2::254)
  'fe80::/10', // link-local
  'fec0::/10', // site-local (deprecated)
  'ff00::/8', // multicast
].map(range6);

/** IPv6 prefixes that carry an IPv4 address in their last 32 bits. */
const EMBEDS_V4_LOW: Range[] = ['::ffff:0:0/96', '::/96', '64:ff9b::/96', '::ffff:0:0:0/96'].map(range6);
const SIX_TO_FOUR = range6('2002::/16');

function isBlockedV4(value: bigint): boolean {
  return BLOCKED_V4.some((r) => inRange(value, r, 32));
}

/** True for loopback, private, link-local, shared, reserved, multicast and metadata addresses, v4 or v6. */
export function isPrivateAddress(ip: string): boolean {
  const v4 = parseIPv4(ip);
  if (v4 !== null) return isBlockedV4(v4);
  const v6 = parseIPv6(ip);
  if (v6 === null) return true; // not an address at all: never a safe target
  if (EMBEDS_V4_LOW.some((r) => inRange(v6, r, 128))) {
    // ::/128 and ::1/128 sit inside ::/96: check them before reading an IPv4 out of them.
    if (v6 === 0n || v6 === 1n) return true;
    return isBlockedV4(v6 & 0xffffffffn);
  }
  if (inRange(v6, SIX_TO_FOUR, 128)) return isBlockedV4((v6 >> 80n) & 0xffffffffn);
  return BLOCKED_V6.some((r) => inRange(v6, r, 128));
}

function invalid(message: string): AppError {
  return new AppError('invalid_base_url', message, { param: 'baseUrl' });
}

function refused(host: string): AppError {
  return new AppError(
    'private_upstream_refused',
    `baseUrl host ${host} is a loopback, private, link-local or metadata address; set NEXUS_ALLOW_PRIVATE_UPSTREAMS=true to allow it`,
    { param: 'baseUrl' },
  );
}

/** The URL's host without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

function resolveAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(Object.assign(new Error('DNS timeout'), { code: 'ETIMEOUT' })), DNS_TIMEOUT_MS);
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => {
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(addresses);
    });
  });
}

/**
 * Checks the syntax and that a host name resolves (always) and, unless private
 * upstreams are allowed, every address the host resolves to. Returns the parsed
 * URL. Errors: 400 `invalid_base_url` or `private_upstream_refused`, param `baseUrl`.
 */
export async function assertSafeUpstreamUrl(raw: string, opts: { allowPrivate: boolean }): Promise<URL> {
  if (raw.length > MAX_URL_LENGTH) throw invalid(`baseUrl must be at most ${MAX_URL_LENGTH} characters`);
  // eslint-disable-next-line no-control-regex -- a URL with a control character is refused: that is what this matches
  if (/[\s\u0000-\u001f\u007f]/.test(raw)) throw invalid('baseUrl must not contain whitespace or control characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid('baseUrl is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('baseUrl must use http or https');
  if (url.username || url.password || /^[a-z]+:\/\/[^/?#]*@/i.test(raw)) {
    throw invalid('baseUrl must not contain credentials; give the API key in apiKey');
  }
  if (raw.includes('#')) throw invalid('baseUrl must not contain a fragment');
  if (raw.includes('?')) throw invalid('baseUrl must not contain a query string');
  if (!url.hostname) throw invalid('baseUrl has no host');

  const host = hostOf(url);
  if (isIP(host)) {
    if (!opts.allowPrivate && isPrivateAddress(host)) throw refused(host);
    return url;
  }
  // Resolved whatever the setting: allowing private addresses does not make a typo a valid host.
  let addresses: LookupAddress[];
  try {
    addresses = await resolveAll(host);
  } catch {
    throw invalid(`baseUrl host ${host} does not resolve`);
  }
  if (addresses.length === 0) throw invalid(`baseUrl host ${host} does not resolve`);
  if (!opts.allowPrivate && addresses.some((a) => isPrivateAddress(a.address))) throw refused(host);
  return url;
}

/** Error given to the socket when guardedLookup refuses an address. */
export class PrivateUpstreamError extends Error {
  readonly code = 'ERR_NEXUS_PRIVATE_UPSTREAM';
  constructor(host: string) {
    super(`upstream host ${host} resolves to a private address`);
    this.name = 'PrivateUpstreamError';
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A dns.lookup-compatible function for `net.connect({ lookup })` and undici's
 * `connect: { lookup }`: resolves as usual and fails the connection when any
 * address is private (unless allowed). It runs on every new connection, so a
 * rebinding name is caught at connect time. IP literals never reach a lookup
 * function: assertSafeUpstreamUrl covers those.
 */
export function guardedLookup(allowPrivate: boolean) {
  return function lookup(hostname: string, options: LookupOptions | number | LookupCallback, callback?: LookupCallback): void {
    const cb = (typeof options === 'function' ? options : callback) as LookupCallback;
    const opts: LookupOptions =
      typeof options === 'object' && options !== null ? options : typeof options === 'number' ? { family: options } : {};
    dnsLookup(hostname, { ...opts, all: true }, (err, addresses) => {
      if (err) return cb(err, opts.all ? [] : '');
      if (!allowPrivate && addresses.some((a) => isPrivateAddress(a.address))) {
        return cb(new PrivateUpstreamError(hostname), opts.all ? [] : '');
      }
      if (opts.all) return cb(null, addresses);
      const first = addresses[0];
      if (!first) return cb(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '');
      cb(null, first.address, first.family);
    });
  };
}

/** For a connection time check of an IP-literal host (no lookup runs for those). */
export function isRefusedHost(host: string, allowPrivate: boolean): boolean {
  return !allowPrivate && isIP(host) !== 0 && isPrivateAddress(host);
}
