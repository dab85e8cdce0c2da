/**
 * The gateway's and the reliability tests through PgBouncer in transaction pooling
 * (scripts/pgbouncer-tests.sh starts it and sets TEST_PGBOUNCER_URL): each test file
 * gets a database of its own, served through the pooler (test/support/test-db.ts).
 * Files of the api, e2e and timed projects alike (vitest.config.ts), each in its own module
 * graph; dist/ is built first, for those that start Nexus as a process.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/gateway/**/*.test.ts', 'test/reliability/**/*.test.ts'],
    // Those that never reach PostgreSQL (the embedded database's, and the units without one) have nothing to
    // learn from the pooler: the main run has them.
    exclude: [
      'test/gateway/gateway.pglite.test.ts',
      'test/gateway/inspectors.test.ts',
      'test/gateway/intrusive-list.test.ts',
      'test/gateway/learned-bounds.test.ts',
      'test/gateway/secret-mask.test.ts',
      'test/gateway/spool.test.ts',
      'test/gateway/upstreams.test.ts',
      'test/reliability/database-unavailable.test.ts',
    ],
    globalSetup: ['test/support/global-setup.ts', 'test/support/build-setup.ts'],
    setupFiles: ['test/support/setup-each.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 20_000,
    reporters: ['default'],
  },
});
