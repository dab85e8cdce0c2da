/**
 * The gateway's and the reliability tests through PgBouncer in transaction pooling
 * (scripts/pgbouncer-tests.sh starts it and sets TEST_PGBOUNCER_URL): each test file
 * gets a database of its own, served through the pooler (test/support/test-db.ts).
 */
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({
  test: {
    ...base.test,
    include: ['test/gateway/**/*.test.ts', 'test/reliability/**/*.test.ts'],
    // Those that never reach PostgreSQL (the embedded database's, and the units without one) have nothing to
    // learn from the pooler: the main run has them.
    exclude: [
      'test/gateway/gateway.pglite.test.ts',
      'test/gateway/inspectors.test.ts',
      'test/gateway/intrusive-list.test.ts',
      'test/gateway/secret-mask.test.ts',
      'test/gateway/upstreams.test.ts',
      'test/reliability/database-unavailable.test.ts',
    ],
  },
});
