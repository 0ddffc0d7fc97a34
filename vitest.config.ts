import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Tests that need more than `npm install`: Debian's chromium for the browser
 * tests, curl and bash for the documentation's shell examples, promtool
 * (Debian's prometheus) for the metrics and alert rules. `npm test`
 * leaves them out; `npm run test:system` (vitest.system.config.ts) runs
 * them, and .ci/run runs both.
 */
export const SYSTEM_TESTS = ['test/web/browser.test.ts', 'test/docs/shellExamples.test.ts', 'test/metrics/promtool.test.ts'];

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...SYSTEM_TESTS],
    globalSetup: ['test/helpers/globalSetup.ts'],
    // Test files run in parallel; each has its own database.
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
