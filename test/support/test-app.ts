/**
 * Starts a real Nexus on 127.0.0.1 (random port) over its own database schema,
 * with a generated client that sends the root Management Key and validates every
 * response against the contract. Log lines are captured (and recorded for the
 * run-wide secret scan).
 *
 * The Config is built from `env` once and frozen: a test that needs another setting
 * starts a Nexus with it (`t.withEnv({...})`, on the same database), never assigns to it.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Transport from 'winston-transport';
import { buildApp, listen, type NexusApp, type Overrides, type RunningServer } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { systemClock } from '../../src/domain/actor.js';
import { createDomain, type TestHooks } from '../../src/domain/services.js';
import { createLogger } from '../../src/observability/logger.js';
import { createClient, type Client } from '../../generated/client/client/index.js';
import { contractFetch } from './contract.js';
import { TEST_ENCRYPTION_KEY, TEST_ROOT_KEY } from './keys.js';
import { runDir } from './paths.js';
import { createTestDatabase, type TestDatabase } from './test-db.js';

export { TEST_ENCRYPTION_KEY, TEST_ROOT_KEY };

class CaptureTransport extends Transport {
  constructor(private readonly lines: string[]) {
    super();
  }
  override log(info: Record<string | symbol, unknown>, next: () => void) {
    const line = JSON.stringify(info);
    this.lines.push(line);
    mkdirSync(runDir, { recursive: true });
    appendFileSync(join(runDir, `logs-${process.pid}.log`), line + '\n');
    next();
  }
}

export interface TestApp {
  url: string;
  nexus: NexusApp;
  config: Config;
  database: TestDatabase;
  /** Generated client with the root Management Key and contract validation. */
  client: Client;
  /** A generated client sending another bearer token (or none). */
  clientWith(token: string | undefined): Client;
  /** fetch with contract validation, for raw requests. */
  fetch: typeof fetch;
  logs: string[];
  running: RunningServer;
  /**
   * What only tests reach: the billing pass's steps run on demand, and repositories to seed rows
   * the API cannot make. The app itself never exposes them (src/domain/services.ts).
   */
  hooks: TestHooks;
  /** Another Nexus on this one's database, with these variables added to its environment (close it). */
  withEnv(env: Record<string, string>): Promise<TestApp>;
  close(): Promise<void>;
}

/**
 * Through PgBouncer in transaction pooling (scripts/pgbouncer-tests.sh), the run says how prepared
 * statements must go; every Nexus of the run, in process or not, gets the same setting.
 */
export function poolerEnv(): Record<string, string> {
  const prepared = process.env.NEXUS_DATABASE_PREPARED_STATEMENTS;
  return prepared ? { NEXUS_DATABASE_PREPARED_STATEMENTS: prepared } : {};
}

export interface TestAppOptions extends Omit<Overrides, 'db' | 'logger' | 'domain'> {
  env?: Record<string, string>;
  /** Serve this database (another app's) instead of a new one; close() leaves it. */
  database?: TestDatabase;
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const shared = options.database;
  const database = shared ?? (await createTestDatabase());
  const config = loadConfig({
    NODE_ENV: 'test',
    PORT: '0',
    HOST: '127.0.0.1',
    NEXUS_MANAGEMENT_KEY: TEST_ROOT_KEY,
    NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
    NEXUS_LOG_LEVEL: 'info',
    NEXUS_KEY_ENVIRONMENT: 'test',
    // The schema it is handed, as a process on it is configured: its changes are announced on that schema's channel,
    // which a Nexus process a test starts on the same schema listens on.
    ...(database.schema ? { NEXUS_DATABASE_SCHEMA: database.schema } : {}),
    ...poolerEnv(),
    ...options.env,
  });
  const logs: string[] = [];
  const logger = createLogger('info', [new CaptureTransport(logs)]);
  const { env: _env, database: _database, ...overrides } = options;
  const domain = createDomain({
    db: database.db,
    config,
    clock: options.clock ?? systemClock,
    logger,
    fetch: options.fetch ?? globalThis.fetch,
  });
  // The history job's retention stays off unless a test asks for it: its round at start could take rows a test seeds
  // older than the default policy while the test reads them (the retention's own tests run it at chosen times).
  const nexus = await buildApp(config, {
    ...overrides,
    db: database.db,
    logger,
    domain,
    skipMigrations: true,
    historyRetention: overrides.historyRetention ?? false,
  });
  const running = await listen(nexus, 0, '127.0.0.1', 2000);
  const checkedFetch = contractFetch();
  const clientWith = (token: string | undefined) =>
    createClient({
      baseUrl: running.url,
      fetch: checkedFetch,
      headers: token ? { Authorization: `Bearer ${token}` } : {},
    });
  return {
    url: running.url,
    nexus,
    config,
    database,
    client: clientWith(TEST_ROOT_KEY),
    clientWith,
    fetch: checkedFetch,
    logs,
    running,
    hooks: domain.testHooks,
    withEnv: (env) => startTestApp({ ...options, env: { ...options.env, ...env }, database }),
    async close() {
      await running.shutdown();
      if (!shared) await database.drop();
    },
  };
}
