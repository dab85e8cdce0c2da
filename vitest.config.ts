/**
 * Projects run one after the other (`npm test`), or the first two alone (`npm run test:fast`):
 *
 * - unit: the files that need neither a database nor the app. No setup file, no schema.
 * - api: the app in process, on the test PostgreSQL. Its files share one module graph per worker
 *   (isolate: false): the app's modules and the contract's validator are loaded once per worker.
 *   Each file still starts its own app(s) on a schema of its own, a copy of the run's migrated
 *   template (test/support/test-db.ts).
 * - e2e: what runs Nexus as a process (dist/server.js, built once by the global setup), the CLI,
 *   the build and release, the packed client, Chromium, the embedded database; each file in a
 *   fresh worker, two at a time.
 * - timed: the e2e files whose faults are timed (kills, outages, a stalled loop, lease TTLs): one
 *   at a time, alone on the machine.
 *
 * A file belongs to unit, e2e or timed by the lists below; every other test file is api.
 */
import { defineConfig } from 'vitest/config';

const unit = [
  'test/billing/projection-rules.test.ts',
  'test/billing/signature.test.ts',
  'test/events/webhook-signature.test.ts',
  'test/gateway/bedrock-protocol.test.ts',
  'test/gateway/call-recorder-logs.test.ts',
  'test/gateway/call-spend.test.ts',
  'test/gateway/charge.test.ts',
  'test/gateway/first-wave.test.ts',
  'test/gateway/input-estimate.test.ts',
  'test/gateway/inspectors.test.ts',
  'test/gateway/batch-lines.test.ts',
  'test/gateway/protocols.test.ts',
  'test/gateway/intrusive-list.test.ts',
  'test/gateway/invocation-record.test.ts',
  'test/gateway/learned-bounds.test.ts',
  'test/gateway/media-bounds.test.ts',
  'test/gateway/o200k-split.test.ts',
  'test/gateway/route-plan.test.ts',
  'test/gateway/secret-mask.test.ts',
  'test/gateway/spool.test.ts',
  'test/gateway/upstreams.test.ts',
  'test/console/money-format.test.ts',
  'test/money/money-rules.test.ts',
  'test/observability/logger.test.ts',
  'test/observability/tracing-config.test.ts',
  'test/people/role-table.test.ts',
  'test/protocols/endpoints.test.ts',
  'test/protocols/gemini-live-events.test.ts',
  'test/protocols/passthrough.test.ts',
  'test/protocols/profiles.test.ts',
  'test/protocols/stream-assemble.test.ts',
  'test/provider-connections/upstream-guard.test.ts',
  'test/quota/model-pricing.test.ts',
  'test/quota/quota-math.test.ts',
  'test/quota/record-sql.test.ts',
  'test/reliability/database-unavailable.test.ts',
  'test/spine/check-layers.test.ts',
  'test/spine/cli-args.test.ts',
  'test/spine/client-retries.test.ts',
  'test/spine/config-lease-ttl.test.ts',
  'test/spine/contract-diff.test.ts',
  'test/spine/deploy.test.ts',
  'test/spine/error-codes.test.ts',
  'test/spine/ids.test.ts',
  'test/spine/row-json.test.ts',
  'test/spine/streamed-json.test.ts',
  'test/spine/versions.test.ts',
];

const e2e = [
  'test/console/console.browser.test.ts',
  'test/console/console.investigate.browser.test.ts',
  'test/console/console.features.browser.test.ts',
  'test/console/console.passthrough.browser.test.ts',
  'test/console/console.request-logs.browser.test.ts',
  'test/console/console.batches.browser.test.ts',
  'test/console/console.management-keys.browser.test.ts',
  'test/console/console.users.browser.test.ts',
  'test/console/console.settings.browser.test.ts',
  'test/console/console.sso.browser.test.ts',
  'test/console/console.roles.browser.test.ts',
  'test/console/console.time.browser.test.ts',
  'test/console/console.money.browser.test.ts',
  'test/console/docs-page.browser.test.ts',
  'test/gateway/batches.crash.test.ts',
  'test/gateway/changes-take-effect.test.ts',
  'test/gateway/gateway.pglite.test.ts',
  'test/gateway/gateway.rate-limits.test.ts',
  'test/gateway/gateway.workers.test.ts',
  'test/observability/tracing.otlp.test.ts',
  'test/spine/client-package.test.ts',
  'test/spine/release.test.ts',
  'test/spine/server-process.test.ts',
];

/**
 * The e2e files that time what they test (a kill within a snapshot window, an outage's spool, a stalled loop, a
 * lease's TTL and renewals): one at a time, after the others, so no other file's processes share their cores.
 */
const timed = [
  'test/gateway/gateway.faults.test.ts',
  'test/reliability/crash-and-outage.test.ts',
  'test/reliability/gemini-live-crash.test.ts',
  'test/reliability/stalled-loop.test.ts',
];

/**
 * What the api, e2e and timed projects share: the contract check after each test, generous timeouts. `expect.poll`
 * waits up to 10 s instead of vitest's 1 s: on a busy 2-core CI host, a console page that fetches again after a click
 * once took longer than a second to show its rows. A poll still passes as soon as it holds.
 */
const withApp = {
  setupFiles: ['test/support/setup-each.ts'],
  testTimeout: 30_000,
  hookTimeout: 60_000,
  teardownTimeout: 20_000,
  expect: { poll: { timeout: 10_000 } },
};

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    // The api files mostly wait on PostgreSQL and sockets: two workers even on 2 cores (vitest's default there is 1).
    maxWorkers: 2,
    reporters: ['default', './test/support/project-durations.ts'],
    projects: [
      {
        test: { name: 'unit', include: unit, pool: 'threads', isolate: false, sequence: { groupOrder: 0 } },
      },
      {
        test: {
          name: 'api',
          include: ['test/**/*.test.ts'],
          exclude: [...unit, ...e2e, ...timed],
          pool: 'forks',
          isolate: false,
          sequence: { groupOrder: 1 },
          ...withApp,
        },
      },
      {
        test: {
          name: 'e2e',
          include: e2e,
          pool: 'forks',
          // Two files at a time, each in a fresh worker: they mostly wait on the processes they start.
          maxWorkers: 2,
          globalSetup: ['test/support/build-setup.ts'],
          sequence: { groupOrder: 2 },
          ...withApp,
        },
      },
      {
        test: {
          name: 'timed',
          include: timed,
          pool: 'forks',
          maxWorkers: 1,
          globalSetup: ['test/support/build-setup.ts'],
          sequence: { groupOrder: 3 },
          ...withApp,
        },
      },
    ],
  },
});
