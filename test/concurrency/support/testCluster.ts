import { afterAll, beforeAll } from 'vitest';
import { createTestDatabase } from '../../helpers/testDatabase.ts';
import { takeTurn, TURN_TIMEOUT_MS } from './oneAtATime.ts';
import { WorkerProcesses } from './WorkerProcesses.ts';

export type TestDatabase = Awaited<ReturnType<typeof createTestDatabase>>;

export interface TestCluster {
  readonly database: TestDatabase;
  readonly workers: WorkerProcesses;
}

/**
 * What each concurrency test file runs against: a database of its own and
 * `workers` worker processes on it, started before the file's tests (once it
 * is the file's turn) and always stopped afterwards, whatever happened.
 * `poolSize` is the test process's own connections, for the callers it plays.
 */
export function clusterForThisFile(options: { workers: number; poolSize: number; env?: Record<string, string> }): TestCluster {
  const cluster = {} as { database: TestDatabase; workers: WorkerProcesses };
  let endTurn: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    endTurn = await takeTurn();
    cluster.database = await createTestDatabase({ poolSize: options.poolSize });
    cluster.workers = new WorkerProcesses(cluster.database.url, options.env);
    await cluster.workers.start(options.workers);
  }, TURN_TIMEOUT_MS);

  afterAll(async () => {
    try {
      await cluster.workers?.stopAll();
      await cluster.database?.drop();
    } finally {
      await endTurn?.();
    }
  });

  return cluster;
}
