import { configDefaults, defineConfig } from 'vitest/config';
import { SYSTEM_TESTS, sharedSettings } from './vitest.config.ts';

/** `npm run test:system`: the tests that need system packages (see SYSTEM_TESTS), with the suite's other settings. */
export default defineConfig(async () => ({ test: { ...(await sharedSettings()), include: SYSTEM_TESTS, exclude: configDefaults.exclude } }));
