import { afterAll, beforeAll, expect, test } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { createBlueprint } from '../src/objects/createBlueprint.ts';
import { createLease } from '../src/objects/createLease.ts';
import { appendCommand } from '../src/queue/appendCommand.ts';
import { SlipwayWorker } from '../src/worker/SlipwayWorker.ts';
import { createTestDatabase, testLog } from './helpers/testDatabase.ts';
import { waitFor } from './helpers/waitFor.ts';

const actor = { issuedBy: 'tester', source: 'cli' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let worker: SlipwayWorker;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 20 });
  worker = await SlipwayWorker.start(database, loadConfig({ DATABASE_URL: database.url }), testLog);
});
afterAll(async () => {
  await worker?.stop();
  await database?.drop();
});

test('a lease goes pending → active → destroyed', async () => {
  const db = database.db;
  await createBlueprint(db, { name: 'sim', driver: 'simulated', maxResources: 2, leasesPerResource: 2 }, actor);
  const leases = await Promise.all([1, 2, 3].map((n) => createLease(db, { blueprint: 'sim', holder: `h${n}` }, actor)));
  for (const { lease } of leases) {
    await waitFor(`lease ${lease.id} active`, async () => {
      const row = await db.selectFrom('leases').select('state').where('id', '=', lease.id).executeTakeFirstOrThrow();
      return row.state === 'active';
    });
  }
  for (const { lease } of leases) {
    await appendCommand(db, { target: { kind: 'lease', id: lease.id }, kind: 'release', actor });
  }
  for (const { lease } of leases) {
    await waitFor(`lease ${lease.id} destroyed`, async () => {
      const row = await db.selectFrom('leases').select('state').where('id', '=', lease.id).executeTakeFirstOrThrow();
      return row.state === 'destroyed';
    });
  }
  // The leases' slots go back to their resource by message, just after.
  await waitFor('every queue to drain', async () => {
    const unsettled = await db.selectFrom('commands').select('id').where('status', 'in', ['queued', 'running']).execute();
    return unsettled.length === 0;
  });
  const resources = await db.selectFrom('resources').select(['state', 'used_slots']).execute();
  expect(resources).toEqual([
    { state: 'active', used_slots: 0 },
    { state: 'active', used_slots: 0 },
  ]);
});
