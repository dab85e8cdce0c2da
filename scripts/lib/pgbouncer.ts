/**
 * A PgBouncer of our own for a script (Debian's package): transaction pooling on a free port of 127.0.0.1, its
 * configuration in a temporary directory, auth_type=any in front of one PostgreSQL (as the user the URL names),
 * run as the current user (as postgres when that is root: PgBouncer refuses to run as root). The tests start
 * theirs with scripts/pgbouncer-tests.sh, which writes the same configuration.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface PgBouncer {
  /** `postgresUrl` with PgBouncer's host and port instead of PostgreSQL's. */
  url(postgresUrl: string): string;
  version: string;
  stop(): void;
}

function binary(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).stdout.trim();
  if (found) return found;
  return existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : undefined;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startPgBouncer(postgresUrl: string, options: { poolSize?: number } = {}): Promise<PgBouncer> {
  const bin = binary();
  if (!bin) throw new Error('PgBouncer is not installed (apt-get install pgbouncer)');
  const target = new URL(postgresUrl);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nexus-pgbouncer-'));
  const root = userInfo().uid === 0;
  if (root) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, -1);
  }
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${target.hostname} port=${target.port || 5432} user=${decodeURIComponent(target.username) || 'postgres'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      'pool_mode = transaction',
      'max_client_conn = 2000',
      `default_pool_size = ${options.poolSize ?? 20}`,
      'ignore_startup_parameters = extra_float_digits',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
  );
  execFileSync(bin, ['-d', ...(root ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')]);
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (up) break;
    if (i > 50) throw new Error(`PgBouncer did not start: ${readFileSync(join(dir, 'pgbouncer.log'), 'utf8')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).split('\n')[0]!;
  return {
    version,
    url(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    stop() {
      try {
        process.kill(Number(readFileSync(join(dir, 'pgbouncer.pid'), 'utf8').trim()), 'SIGTERM');
      } catch {
        // already gone
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
