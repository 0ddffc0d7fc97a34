import { afterAll, beforeAll } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { runCli, type CliRun } from './runCli.ts';

export interface CliTestEnv {
  readonly database: Awaited<ReturnType<typeof createTestDatabase>>;
  /** Runs `slipway <args>` against this file's database. */
  cli(...args: string[]): Promise<CliRun>;
}

/**
 * A test file's own migrated database with a worker running in the test
 * process, so the CLI under test (a child process) sees its commands run.
 * `workerEnv` adds settings for that worker (e.g. no collector schedule).
 */
export function cliTestEnv(workerEnv: Record<string, string> = {}): CliTestEnv {
  let database: CliTestEnv['database'] | undefined;
  let worker: SlipwayWorker | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    worker = await SlipwayWorker.start(database, loadConfig({ ...workerEnv, DATABASE_URL: database.url }), testLog);
  });
  afterAll(async () => {
    await worker?.stop();
    await database?.drop();
  });
  return {
    get database() {
      if (!database) throw new Error('the test database is made in beforeAll');
      return database;
    },
    cli: (...args) => runCli(args, database!.url),
  };
}
