/** NEXUS_TRUST_PROXY read: whose forwarding headers are believed (src/config.ts, src/http/public-url.ts). */
import { isIP } from 'node:net';

/** The names express's `trust proxy` gives address ranges, as NEXUS_TRUST_PROXY takes them too. */
const PROXY_RANGES: Record<string, readonly string[]> = {
  loopback: ['127.0.0.1/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * NEXUS_TRUST_PROXY's value: false, true (any peer), or the address ranges of the proxies whose forwarding
 * headers are believed (an address alone is its /32 or /128); a string: the entry that is none of these.
 */
export function trustProxyOf(value: string): boolean | readonly string[] | string {
  const v = value.trim().toLowerCase();
  if (v === 'false') return false;
  if (v === 'true') return true;
  const ranges: string[] = [];
  for (const entry of v.split(',').map((e) => e.trim())) {
    const named = PROXY_RANGES[entry];
    if (named) {
      ranges.push(...named);
      continue;
    }
    const [address = '', prefix, extra] = entry.split('/');
    const family = isIP(address);
    const bits = family === 4 ? 32 : 128;
    if (!family || extra !== undefined || (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits))) return entry;
    ranges.push(`${address}/${prefix ?? bits}`);
  }
  return Object.freeze(ranges);
}
