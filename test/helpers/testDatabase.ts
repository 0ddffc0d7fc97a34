import { inject } from 'vitest';
import { createFreshDatabase, type FreshDatabase } from '../../src/db/freshDatabase.ts';
import { createLogger, type Logger } from '../../src/log.ts';

export const testLog: Logger = createLogger(process.env.LOG_LEVEL ?? 'warn', 'test');

/** A fresh, migrated database of this test file's own, dropped by `drop()`. */
export function createTestDatabase(options: { poolSize?: number } = {}): Promise<FreshDatabase> {
  return createFreshDatabase(inject('adminUrl'), testLog, { prefix: 'slipway_t', ...options });
}
