import type { KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Backpressure } from '../../src/api/backpressure.ts';
import { ApiError } from '../../src/api/errors.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// No worker runs in this file: every lease's allocate stays queued, so the
// backlog is exactly the number of leases made.
const alice = { issuedBy: 'alice@host', source: 'cli', reason: 'test' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 30 });
  await createBlueprint(database.db, { name: 'pool', driver: 'simulated', maxResources: 1 }, alice);
  for (let i = 0; i < 3; i++) await createLease(database.db, { blueprint: 'pool', holder: 'alice' }, alice);
});
afterAll(async () => database?.drop());

/** The database as the API uses it, counting the statements that reach the server. */
function countingStatements() {
  const seen = { statements: 0 };
  const plugin: KyselyPlugin = {
    transformQuery: (args) => {
      seen.statements++;
      return args.node;
    },
    transformResult: async (args) => args.result,
  };
  return { db: database.db.withPlugin(plugin), seen };
}

test('many requests at once share one count of the backlog, and each gets its answer from it', async () => {
  const { db, seen } = countingStatements();
  const roomy = new Backpressure({ queueDepth: 10, backlog: 4 });
  await Promise.all(Array.from({ length: 20 }, () => roomy.assertBacklogRoom(db)));
  expect(seen.statements).toBe(1);

  const full = new Backpressure({ queueDepth: 10, backlog: 3 });
  const answers = await Promise.allSettled(Array.from({ length: 20 }, () => full.assertBacklogRoom(db)));
  expect(seen.statements).toBe(2);
  for (const answer of answers) {
    expect(answer.status).toBe('rejected');
    const error = (answer as PromiseRejectedResult).reason as ApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect(error.code).toBe('backlog_full');
  }
});
