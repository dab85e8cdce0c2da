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
  },
});
