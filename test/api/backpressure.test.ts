import { type KyselyPlugin, sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Backpressure } from '../../src/api/backpressure.ts';
import { ApiError } from '../../src/api/errors.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { Database } from '../../src/db/Database.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';

// No worker runs in this file: every lease's request for a slot stays queued, so the
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

test('a request inside a transaction never waits for a count that needs its connection', async () => {
  // Two connections, both held by transactions (idempotent requests); a
  // plain request's count then waits for one of them.
  const small = Database.fromUrl(database.url, testLog, { poolSize: 2 });
  const pressure = new Backpressure({ queueDepth: 10, backlog: 1000 });
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let holding = 0;
  let bothHeld!: () => void;
  const held = new Promise<void>((resolve) => (bothHeld = resolve));
  const transactions = Promise.all(
    [0, 1].map(() =>
      small.db.transaction().execute(async (trx) => {
        await sql`select 1`.execute(trx);
        if (++holding === 2) bothHeld();
        await gate;
        // The shared count cannot run until a transaction ends: this must not wait for it.
        await within(20_000, pressure.assertBacklogRoom(trx));
      }),
    ),
  );
  try {
    await held;
    const plain = pressure.assertBacklogRoom(small.db);
    open();
    await transactions;
    await within(20_000, plain);
  } finally {
    await small.close();
  }
});

function within<T>(ms: number, work: Promise<T>): Promise<T> {
  return Promise.race([work, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms).unref())]);
}
