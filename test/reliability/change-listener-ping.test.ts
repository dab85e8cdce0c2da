/**
 * The change listener's pings (src/db/change-listener.ts), on the real PostgreSQL through a TCP relay the test can
 * stall: an answer vouches that every notification committed before its question has arrived, and a session that
 * stops answering (a network that drops it without a word) is taken as lost within the ping timeout, then listens
 * again. PGlite has no listener.
 */
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startChangeListener, type ChangeListener } from '../../src/db/change-listener.js';
import { createLogger } from '../../src/observability/logger.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { until } from '../gateway/gateway-support.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
const PING_MS = 40;
const PING_TIMEOUT_MS = 400;

/** A TCP relay to PostgreSQL whose open connections `stall` stops answering (new ones pass). */
async function startRelay(target: URL) {
  const pairs = new Set<[net.Socket, net.Socket]>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    /** The open connections' answers are no longer passed on (the sockets stay open). */
    stall: () => {
      for (const [, upstream] of pairs) upstream.unpipe();
    },
    close: async () => {
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise((r) => server.close(r));
    },
  };
}

describe.runIf(usesPostgres)('the change listener, pinged', () => {
  let database: TestDatabase;
  let relay: Awaited<ReturnType<typeof startRelay>>;
  let listener: ChangeListener | undefined;
  const channel = `nexus_ping_${process.pid}_${Date.now()}`;
  const heard: { at: number; payloads: number }[] = [];
  const payloads: string[] = [];
  const events: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    relay = await startRelay(new URL(database.directUrl ?? database.url!));
    listener = startChangeListener({
      url: relay.url,
      channel,
      logger: createLogger('silent'),
      onPayload: (payload) => payloads.push(payload),
      onListening: (again) => events.push(again ? 'listening again' : 'listening'),
      onFailure: () => events.push('failed'),
      onHeard: (at) => heard.push({ at, payloads: payloads.length }),
      pingMs: PING_MS,
      pingTimeoutMs: PING_TIMEOUT_MS,
    });
    await listener.ready;
  });
  afterAll(async () => {
    await listener?.close();
    await relay?.close();
    await database?.drop();
  });

  it('hears every notification committed before a ping was asked by the time that ping is answered', async () => {
    expect(events).toEqual(['listening']);
    await until(async () => heard.length >= 3, 2000);
    const notifier = new pg.Client({ connectionString: database.directUrl ?? database.url! });
    await notifier.connect();
    try {
      for (let i = 0; i < 5; i++) {
        await notifier.query('select pg_notify($1, $2)', [channel, `change ${i}`]);
        const committed = Date.now();
        // The first answer to a question asked after the commit: the notification came before it.
        await until(async () => heard.some((h) => h.at > committed), 2000);
        expect(heard.find((h) => h.at > committed)!.payloads).toBe(i + 1);
      }
    } finally {
      await notifier.end();
    }
    expect(payloads).toEqual([0, 1, 2, 3, 4].map((i) => `change ${i}`));
  });

  it('takes a session that stops answering as lost within the ping timeout, stops vouching, and listens again', async () => {
    const stalledAt = Date.now();
    const heardBefore = heard.length;
    relay.stall();
    await until(async () => events.includes('failed'), PING_TIMEOUT_MS * 5);
    const lostAfter = Date.now() - stalledAt;
    expect(lostAfter).toBeGreaterThanOrEqual(PING_TIMEOUT_MS);
    expect(lostAfter).toBeLessThan(PING_TIMEOUT_MS + 1500);
    // Nothing asked after the stall was answered: at most the question under way when it began.
    expect(heard.slice(heardBefore).every((h) => h.at <= stalledAt)).toBe(true);
    // It listens again through a new connection (the relay passes new ones), and is pinged again.
    await until(async () => events.includes('listening again'), 5000);
    const again = Date.now();
    await until(async () => heard.some((h) => h.at > again), 2000);
  });
});

/**
 * A listener whose URL goes through PgBouncer in transaction pooling (a misconfiguration: NEXUS_DATABASE_LISTEN_URL
 * should name PostgreSQL itself). Its LISTEN ran on one server session; once that session is busy with another
 * client's transaction, its ping goes to another, which does not listen. Run by `npm run test:pgbouncer`.
 */
describe.runIf(usesPostgres && process.env.TEST_PGBOUNCER_URL)('the change listener, through a transaction pooler', () => {
  let database: TestDatabase;
  let listener: ChangeListener | undefined;
  const holders: pg.Client[] = [];
  const channel = `nexus_pooled_${process.pid}_${Date.now()}`;
  const heard: number[] = [];
  const events: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    listener = startChangeListener({
      url: database.url!,
      channel,
      logger: createLogger('silent'),
      onPayload: () => {},
      onListening: (again) => events.push(again ? 'listening again' : 'listening'),
      onFailure: () => events.push('failed'),
      onHeard: (at) => heard.push(at),
      pingMs: PING_MS,
      pingTimeoutMs: PING_TIMEOUT_MS,
    });
    await listener.ready;
  });
  afterAll(async () => {
    await listener?.close();
    for (const holder of holders) await holder.end().catch(() => {});
    await database?.drop();
  });

  it('stops vouching once a ping finds its session not listening, and keeps listening without reconnecting', async () => {
    await until(async () => heard.length >= 2, 2000);
    // Transactions through the pooler until one holds the server session the LISTEN ran on.
    const held = async () => {
      const holder = new pg.Client({ connectionString: database.url! });
      holders.push(holder);
      await holder.connect();
      await holder.query('begin');
      const { rows } = await holder.query('select count(*)::int as n from pg_listening_channels() c where c = $1', [channel]);
      return rows[0].n === 1;
    };
    let holding = false;
    for (let i = 0; i < 8 && !holding; i++) holding = await held();
    expect(holding).toBe(true);
    await until(async () => events.includes('failed'), 2000);
    const stoppedAt = heard.length;
    await new Promise((r) => setTimeout(r, PING_MS * 10));
    expect(heard.length).toBe(stoppedAt);
    expect(events).toEqual(['listening', 'failed']);
  });
});
