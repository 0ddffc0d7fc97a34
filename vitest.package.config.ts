import { defineConfig } from 'vitest/config';

/**
 * `npm run test:package`: the package packed, installed into a prefix of its
 * own and run from there (test/package/). Not part of `npm test`: packing
 * builds dist/ and installing reads the npm registry or npm's cache; .ci/run
 * runs it once. It needs no test database.
 */
export default defineConfig({ test: { include: ['test/package/**/*.test.ts'], testTimeout: 300_000, hookTimeout: 600_000 } });
