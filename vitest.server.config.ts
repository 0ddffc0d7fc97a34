import { configDefaults, defineConfig } from 'vitest/config';
import { SYSTEM_TESTS, sharedSettings } from './vitest.config.ts';

/**
 * `npm run test:server`: the part of `npm test` whose outcome can depend on
 * the PostgreSQL server's major version or settings: the migrations, the SQL
 * functions and the plans (test/db/), the drains' statements and locks
 * (test/engine/), the races between processes (test/concurrency/), restarts
 * and crashes (test/faults/) and the rolling upgrade (test/upgrade/). The rest
 * reaches the database through the same statements. .ci/run runs the whole
 * suite on one server and this part on the other (docs/development.md).
 */
const SERVER_TESTS = [
  'test/db/**/*.test.ts',
  'test/engine/**/*.test.ts',
  'test/concurrency/**/*.test.ts',
  'test/faults/**/*.test.ts',
  'test/upgrade/**/*.test.ts',
];

export default defineConfig(async () => ({
  test: { ...(await sharedSettings()), include: SERVER_TESTS, exclude: [...configDefaults.exclude, ...SYSTEM_TESTS] },
}));
