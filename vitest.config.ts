import { configDefaults, defineConfig } from 'vitest/config';
import { filesAtOnce } from './test/helpers/filesAtOnce.ts';

/**
 * Tests that need more than `npm install`: Debian's chromium for the browser
 * tests, curl and bash for the documentation's shell examples, promtool
 * (Debian's prometheus) for the metrics and alert rules, a PostgreSQL server
 * build with pg_basebackup and pg_ctl (Debian's postgresql-15) for the
 * failover to a standby. `npm test`
 * leaves them out; `npm run test:system` (vitest.system.config.ts) runs
 * them, and .ci/run runs both.
 */
export const SYSTEM_TESTS = [
  'test/web/browser.test.ts',
  'test/docs/shellExamples.test.ts',
  'test/metrics/promtool.test.ts',
  'test/faults/failover.test.ts',
];

/** The package installed from its tarball: `npm run test:package` (vitest.package.config.ts). */
export const PACKAGE_TESTS = 'test/package/**';

/** What `npm test` and `npm run test:system` share. */
export async function sharedSettings() {
  return {
    globalSetup: ['test/helpers/globalSetup.ts'],
    // Test files run in parallel, as many as the server's connections allow; each has its own database.
    maxWorkers: await filesAtOnce(),
    testTimeout: 120_000,
    hookTimeout: 120_000,
  };
}

export default defineConfig(async () => ({
  test: { ...(await sharedSettings()), include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...SYSTEM_TESTS, PACKAGE_TESTS] },
}));
