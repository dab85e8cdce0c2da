/**
 * A Nexus as its own process for the tests (scripts/lib/nexus-process.ts), with
 * the test keys and settings of the in-process test app. It runs dist/server.js,
 * which the e2e and timed projects' global setup builds once (test/support/build-setup.ts).
 */
import { startNexusProcess as start, type NexusProcess } from '../../scripts/lib/nexus-process.js';
import { TEST_ENCRYPTION_KEY, TEST_ROOT_KEY } from './keys.js';
import { poolerEnv } from './test-app.js';

export type { NexusProcess };

export function startNexusProcess(env: Record<string, string>): Promise<NexusProcess> {
  return start(
    {
      NEXUS_MANAGEMENT_KEY: TEST_ROOT_KEY,
      NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
      NEXUS_KEY_ENVIRONMENT: 'test',
      NEXUS_LOG_LEVEL: 'info',
      ...poolerEnv(),
      ...env,
    },
    { built: true },
  );
}
