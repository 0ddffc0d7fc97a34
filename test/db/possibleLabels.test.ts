import type { Kysely } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { down, up } from '../../migrations/0033_possible_labels.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { handDrain } from '../gc/support/handDrain.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// A blueprint's possible_labels are written with its settings from what its
// driver answers; migration 0033 gives the blueprints made before it the same.
let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database?.drop());

const actor = { issuedBy: 'tester', source: 'cli' } as const;

test("migration 0033 fills a blueprint's possible labels as its driver answers them", async () => {
  const db = database.db;
  const made = [
    { name: 'pool', driver: 'static-pool', settings: { entries: [{ name: 'a', labels: { arch: 'arm64' } }, { name: 'b' }] } },
    { name: 'sim', driver: 'simulated', settings: { labels: { os: 'linux' } } },
    { name: 'sim-plain', driver: 'simulated', settings: {} },
    { name: 'dirs', driver: 'directory', settings: { root: '/tmp/slipway-possible-labels' } },
    { name: 'programmed', driver: 'exec', settings: { commands: { destroyResource: ['true'] } } },
  ];
  for (const b of made) await createBlueprint(db, { ...b, maxResources: 1 }, actor);
  const stored = () => db.selectFrom('blueprints').select(['name', 'possible_labels']).orderBy('id').execute();
  const written = await stored();
  expect(written).toEqual([
    { name: 'pool', possible_labels: [{ arch: 'arm64' }, {}] },
    { name: 'sim', possible_labels: [{ os: 'linux' }] },
    { name: 'sim-plain', possible_labels: [{}] },
    { name: 'dirs', possible_labels: [{}] },
    { name: 'programmed', possible_labels: null },
  ]);
  // Down leaves the schema as the release before had it; up fills the column anew (a migration is given a Kysely of no tables).
  const migrating = db as unknown as Kysely<unknown>;
  await down(migrating);
  await up(migrating);
  expect(await stored()).toEqual(written);
});

test('new settings applied by the drain bring their possible labels', async () => {
  const db = database.db;
  const { id } = await createBlueprint(
    db,
    { name: 'pool-changing', driver: 'static-pool', settings: { entries: [{ name: 'a', labels: { gpu: 't4' } }] }, maxResources: 1 },
    actor,
  );
  const settings = { entries: [{ name: 'b', labels: { gpu: 'a100' } }, { name: 'c' }] };
  await appendCommand(db, { target: { kind: 'blueprint', id }, kind: 'update_settings', payload: { settings }, actor });
  await handDrain(database).all();
  const row = await db.selectFrom('blueprints').select(['settings', 'possible_labels']).where('id', '=', id).executeTakeFirstOrThrow();
  expect(row).toEqual({ settings, possible_labels: [{ gpu: 'a100' }, {}] });
});
