import { configDefaults, defineConfig } from 'vitest/config';
import base, { SYSTEM_TESTS } from './vitest.config.ts';

/** `npm run test:system`: the tests that need system packages (see SYSTEM_TESTS), with the suite's other settings. */
export default defineConfig({ test: { ...base.test, include: SYSTEM_TESTS, exclude: configDefaults.exclude } });
