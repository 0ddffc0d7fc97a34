import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { EmbeddedDatabase } from '../../src/db/EmbeddedDatabase.ts';
import { createLogger } from '../../src/log.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A server where each test file may create its own database. */
    adminUrl: string;
  }
}

/**
 * Without DATABASE_URL the tests start their own embedded PostgreSQL (under
 * .slipway/test, apart from the one `npm start` uses); with it, they use that
 * server. Either way each test file then makes a database of its own.
 */
export default async function setup(project: TestProject) {
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'test-setup');
  let embedded: EmbeddedDatabase | undefined;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    embedded = await EmbeddedDatabase.open(path.resolve('.slipway', 'test'), log, 'postgres');
    adminUrl = embedded.url;
  }
  project.provide('adminUrl', adminUrl);
  return async () => {
    await embedded?.stop();
  };
}
