import { createServer, type Server } from 'node:http';
import { closeServer, listenLocal } from '../support/local-server.js';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assertSafeUpstreamUrl,
  guardedLookup,
  isPrivateAddress,
  isRefusedHost,
  PrivateUpstreamError,
} from '../../src/domain/security/upstream-guard.js';
import { normalizeBaseUrl } from '../../src/domain/provider-connections/provider-connection-service.js';
import { AppError } from '../../src/errors.js';

describe('isPrivateAddress', () => {
  it.each([
    ['127.0.0.1', 'IPv4 loopback'],
    ['127.255.255.254', 'the whole 127/8'],
    ['0.0.0.0', 'unspecified, reaches the local host'],
    ['10.1.2.3', '10/8'],
    ['172.16.0.1', '172.16/12 start'],
    ['172.31.255.255', '172.16/12 end'],
    ['192.168.1.1', '192.168/16'],
    ['169.254.169.254', 'cloud metadata (link-local)'],
    ['169.254.0.1', 'link-local'],
    ['100.64.0.1', 'shared address space 100.64/10'],
    ['100.100.100.200', 'Alibaba metadata'],
    ['100.127.255.255', '100.64/10 end'],
    ['192.0.0.192', 'Oracle metadata'],
    ['168.63.129.16', 'Azure wire server'],
    ['198.18.0.1', 'benchmarking'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['::1', 'IPv6 loopback'],
    ['::', 'IPv6 unspecified'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback (dotted)'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback (hex)'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::127.0.0.1', 'IPv4-compatible loopback'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 of the metadata address'],
    ['2002:7f00:1::', '6to4 of loopback'],
    ['fc00::1', 'unique local fc00::/7'],
    ['fd00:ec2::254', 'AWS metadata over IPv6'],
    ['fdff:ffff::1', 'fc00::/7 end'],
    ['fe80::1', 'IPv6 link-local'],
    ['fe80::1%eth0', 'link-local with a zone'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'IPv6 multicast'],
    ['2001:db8::1', 'documentation'],
    ['not-an-ip', 'not an address at all'],
  ])('refuses %s (%s)', (ip) => {
    expect(isPrivateAddress(ip)).toBe(true);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '172.15.255.255',
    '172.32.0.1',
    '100.63.255.255',
    '100.128.0.1',
    '169.253.255.255',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    'fbff::1',
  ])('allows the public address %s', (ip) => {
    expect(isPrivateAddress(ip)).toBe(false);
  });
});

describe('assertSafeUpstreamUrl', () => {
  async function codeOf(url: string, allowPrivate = false): Promise<string> {
    try {
      await assertSafeUpstreamUrl(url, { allowPrivate });
      return 'ok';
    } catch (err) {
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).extras.param).toBe('baseUrl');
      return (err as AppError).code;
    }
  }

  it.each([
    ['ftp://example.com', 'invalid_base_url'],
    ['javascript:alert(1)', 'invalid_base_url'],
    ['file:///etc/passwd', 'invalid_base_url'],
    ['example.com', 'invalid_base_url'],
    ['http://user:pass@8.8.8.8', 'invalid_base_url'],
    ['http://user@8.8.8.8', 'invalid_base_url'],
    ['http://8.8.8.8/#x', 'invalid_base_url'],
    ['http://8.8.8.8/?x=1', 'invalid_base_url'],
    ['http://8.8.8.8/a b', 'invalid_base_url'],
    [`http://8.8.8.8/${'a'.repeat(2100)}`, 'invalid_base_url'],
    ['http://127.0.0.1:8080', 'private_upstream_refused'],
    ['http://127.1', 'private_upstream_refused'],
    ['http://2130706433', 'private_upstream_refused'],
    ['http://0x7f.0.0.1', 'private_upstream_refused'],
    ['http://0.0.0.0:80', 'private_upstream_refused'],
    ['http://[::1]:8080', 'private_upstream_refused'],
    ['http://[::ffff:127.0.0.1]', 'private_upstream_refused'],
    ['http://169.254.169.254/latest/meta-data', 'private_upstream_refused'],
    ['http://[fd00:ec2::254]', 'private_upstream_refused'],
    ['http://10.0.0.5:8000', 'private_upstream_refused'],
    ['http://localhost:11434', 'private_upstream_refused'],
    ['https://8.8.8.8', 'ok'],
    ['http://[2606:4700:4700::1111]:8443/prefix', 'ok'],
  ])('%s -> %s', async (url, expected) => {
    expect(await codeOf(url)).toBe(expected);
  });

  it('allows private addresses when the deployment says so, but never a bad URL', async () => {
    expect(await codeOf('http://127.0.0.1:8080', true)).toBe('ok');
    expect(await codeOf('http://localhost:1', true)).toBe('ok');
    expect(await codeOf('http://u:p@127.0.0.1', true)).toBe('invalid_base_url');
  });

  it('refuses a host that does not resolve, even when private addresses are allowed', async () => {
    expect(await codeOf('http://nexus-test-does-not-exist.invalid')).toBe('invalid_base_url');
    expect(await codeOf('http://nexus-test-does-not-exist.invalid', true)).toBe('invalid_base_url');
  });

  it('normalises: no trailing slash, no /v1 suffix', () => {
    expect(normalizeBaseUrl(new URL('http://127.0.0.1:9/'))).toBe('http://127.0.0.1:9');
    expect(normalizeBaseUrl(new URL('https://API.example.com/openai/'))).toBe('https://api.example.com/openai');
    expect(() => normalizeBaseUrl(new URL('https://api.openai.com/v1'))).toThrow(/v1/);
  });

  it('isRefusedHost checks IP literals only, which never reach a lookup', () => {
    expect(isRefusedHost('127.0.0.1', false)).toBe(true);
    expect(isRefusedHost('127.0.0.1', true)).toBe(false);
    expect(isRefusedHost('8.8.8.8', false)).toBe(false);
    expect(isRefusedHost('localhost', false)).toBe(false);
  });
});

describe('guardedLookup, at connection time', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end('ok'));
    port = Number(new URL(await listenLocal(server)).port);
  });
  afterAll(() => closeServer(server));

  it('answers like dns.lookup, with and without `all`', async () => {
    const lookup = guardedLookup(true);
    const one = await new Promise<[string, number | undefined]>((resolve, reject) =>
      lookup('localhost', { family: 4 }, (err, address, family) => (err ? reject(err) : resolve([address as string, family]))),
    );
    expect(one).toEqual(['127.0.0.1', 4]);
    const all = await new Promise<unknown>((resolve, reject) =>
      lookup('localhost', { all: true, family: 4 }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
    );
    expect(all).toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('fails the lookup of a name that resolves to a private address', async () => {
    const lookup = guardedLookup(false);
    const err = await new Promise<unknown>((resolve) => lookup('localhost', {}, (e) => resolve(e)));
    expect(err).toBeInstanceOf(PrivateUpstreamError);
  });

  it('refuses the connection through undici, checked on each new connection', async () => {
    const refusing = new Agent({ connect: { lookup: guardedLookup(false) } });
    const allowing = new Agent({ connect: { lookup: guardedLookup(true) } });
    try {
      await expect(request(`http://localhost:${port}/`, { dispatcher: refusing })).rejects.toMatchObject({
        code: 'ERR_NEXUS_PRIVATE_UPSTREAM',
      });
      const res = await request(`http://localhost:${port}/`, { dispatcher: allowing });
      expect(await res.body.text()).toBe('ok');
    } finally {
      await refusing.destroy();
      await allowing.destroy();
    }
  });
});
