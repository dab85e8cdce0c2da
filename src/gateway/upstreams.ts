/**
 * One undici Pool per upstream origin, with keep-alive. Every new connection
 * resolves its host through guardedLookup, so a name that (re)resolves to a
 * private address is refused at connect time (DNS rebinding); an IP-literal
 * host is checked here, since no lookup runs for it. A pool no call has used
 * for IDLE_POOL_MS, with none under way, is closed and forgotten: each origin
 * ever called (a connection archived or moved to another URL, a tenant's own
 * endpoint) kept its pool and its clients for the life of the process.
 */
import type { Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { Pool } from 'undici';
import { guardedLookup, isRefusedHost } from '../domain/security/upstream-guard.js';
import { AppError } from '../errors.js';

/** How long a pool may go unused before it is closed (past keepAliveMaxTimeout: its sockets are gone by then). */
const IDLE_POOL_MS = 6 * 60_000;

export function createUpstreamPools(options: { allowPrivate: boolean; connections?: number; idlePoolMs?: number }) {
  const pools = new Map<string, { pool: Pool; usedAt: number }>();
  const lookup = guardedLookup(options.allowPrivate);
  const idleMs = options.idlePoolMs ?? IDLE_POOL_MS;
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [origin, entry] of pools) {
        // stats.size: requests queued or running on it (a stream may run for longer than idleMs).
        if (now - entry.usedAt < idleMs || entry.pool.stats.size > 0) continue;
        pools.delete(origin);
        entry.pool.close().catch(() => {});
      }
    },
    Math.max(10, Math.floor(idleMs / 2)),
  );
  sweep.unref();
  return {
    /** The origin's pool; the caller dispatches its request on it at once (the sweep runs on a timer, never in between). */
    get(url: URL): Pool {
      const known = pools.get(url.origin);
      if (known) {
        known.usedAt = Date.now();
        return known.pool;
      }
      const host = url.hostname.replace(/^\[|\]$/g, '');
      if (isRefusedHost(host, options.allowPrivate)) {
        throw new AppError('upstream_unavailable', 'The provider address is private and private upstreams are not allowed');
      }
      const pool = new Pool(url.origin, {
        connections: options.connections ?? 256,
        keepAliveTimeout: 30_000,
        keepAliveMaxTimeout: 300_000,
        connect: { lookup: lookup },
      });
      pools.set(url.origin, { pool, usedAt: Date.now() });
      return pool;
    },
    /** Origins with a pool (tests). */
    get size(): number {
      return pools.size;
    },
    async close(): Promise<void> {
      clearInterval(sweep);
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((p) => p.pool.destroy().catch(() => {})));
    },
  };
}

const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/**
 * The gateway asks upstreams for an identity body (it reads usage from it). One
 * that compresses anyway is decompressed on the way (relay.ts): the client gets
 * a body it can read (without the header that said how) and the meter sees JSON
 * or SSE. undefined: nothing to decode; null: an encoding it cannot decode, the
 * body is passed on as is, with its header.
 */
export function decoderFor(contentEncoding: string | string[] | undefined): Transform | undefined | null {
  if (contentEncoding === undefined) return undefined;
  const encoding = String(contentEncoding).trim().toLowerCase();
  if (!encoding || encoding === 'identity') return undefined;
  const decoder = DECODERS[encoding];
  return decoder ? decoder() : null;
}
