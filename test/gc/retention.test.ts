import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { ObjectKind } from '../../migrations/schema.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand, appendInTransaction } from '../../src/queue/appendCommand.ts';
import { handDrainSuite } from './support/handDrain.ts';

// Retention with the drain and the collector run by hand. Age is made by
// moving timestamps back, as if the rows had been written long ago.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

const DAY = "interval '1 day'";

/** Moves an object's row and its whole history `days` into the past. */
async function age(kind: ObjectKind, id: number, days: number) {
  const table = { lease: 'leases', resource: 'resources', blueprint: 'blueprints' }[kind];
  await sql`update ${sql.table(table)} set updated_at = now() - ${sql.raw(`${days} * ${DAY}`)} where id = ${id}`.execute(db());
  await sql`update events set created_at = now() - ${sql.raw(`${days} * ${DAY}`)} where target_kind = ${kind} and target_id = ${id}`.execute(db());
  await sql`update commands set created_at = now() - ${sql.raw(`${days} * ${DAY}`)}, finished_at = now() - ${sql.raw(`${days} * ${DAY}`)}
            where target_kind = ${kind} and target_id = ${id}`.execute(db());
}

async function historyCount(kind: ObjectKind, id: number) {
  const count = async (table: 'events' | 'commands') =>
    Number(
      (
        await db()
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('target_kind', '=', kind)
          .where('target_id', '=', id)
          .executeTakeFirstOrThrow()
      ).n,
    );
  return { events: await count('events'), commands: await count('commands') };
}

const exists = async (kind: 'lease' | 'resource', id: number) =>
  (await db()
    .selectFrom(kind === 'lease' ? 'leases' : 'resources')
    .select('id')
    .where('id', '=', id)
    .executeTakeFirst()) !== undefined;

test('retention prunes destroyed objects older than it, with their history, and nothing else', async () => {
  const b = await createBlueprint(db(), { name: 'old', driver: 'simulated', maxResources: 5, leasesPerResource: 1 }, alice);
  const lease = async () => (await createLease(db(), { blueprint: 'old', holder: 'h' }, alice)).lease.id;
  const [oldA, oldB, recent, live, lateGrant] = [await lease(), await lease(), await lease(), await lease(), await lease()];
  await hand.all();
  for (const id of [oldA, oldB, recent, lateGrant]) await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: alice });
  await hand.all();
  // A resource reclaimed long ago, no lease pointing at it any more (its leases are old too).
  const resources = await db().selectFrom('resources').selectAll().where('blueprint_id', '=', b.id).orderBy('id').execute();
  const liveResource = (await db().selectFrom('leases').select('resource_id').where('id', '=', live).executeTakeFirstOrThrow()).resource_id!;
  for (const r of resources.filter((r) => r.id !== liveResource && r.used_slots === 0)) {
    await appendCommand(db(), { target: { kind: 'resource', id: r.id }, kind: 'reclaim', actor: alice });
  }
  await hand.all();
  const goneResources = (
    await db().selectFrom('resources').select('id').where('blueprint_id', '=', b.id).where('state', '=', 'destroyed').execute()
  ).map((r) => r.id);
  expect(goneResources).toHaveLength(4);
  // A destroyed resource a kept lease row still names is kept with it.
  const resourceOf = async (id: number) =>
    (await db().selectFrom('leases').select('resource_id').where('id', '=', id).executeTakeFirstOrThrow()).resource_id!;
  const prunable = [await resourceOf(oldA), await resourceOf(oldB)];
  const named = [await resourceOf(recent), await resourceOf(lateGrant)];

  // Old: two destroyed leases, the destroyed resources, and a live lease's and resource's history.
  for (const id of [oldA, oldB, lateGrant, live]) await age('lease', id, 40);
  for (const id of [...goneResources, liveResource]) await age('resource', id, 40);
  await age('lease', recent, 10);
  await age('blueprint', b.id, 40);
  // A destroyed lease with a command still queued (a late grant on its way) is kept.
  await db()
    .transaction()
    .execute((trx) =>
      appendInTransaction(
        trx,
        { target: { kind: 'lease', id: lateGrant }, kind: 'deny', payload: { reason: 'late' }, actor: alice },
        { fromOutside: false, wake: false },
      ),
    );
  // Other objects' commands that point at what is pruned keep their rows.
  const linked = await db()
    .selectFrom('commands')
    .select(['id', 'target_kind', 'target_id'])
    .where('caused_by', 'in', (eb) =>
      eb.selectFrom('commands').select('id').where('target_kind', '=', 'lease').where('target_id', 'in', [oldA, oldB]),
    )
    .where((eb) => eb.not(eb.and([eb('target_kind', '=', 'lease'), eb('target_id', 'in', [oldA, oldB])])))
    .execute();
  expect(linked.length).toBeGreaterThan(0);
  const liveBefore = await historyCount('lease', live);
  const liveResourceBefore = await historyCount('resource', liveResource);
  const blueprintBefore = await historyCount('blueprint', b.id);

  const pass = await hand.pass({ batchSize: 1 }); // batches of one: the pass goes on until done
  const pruned = pass.steps.pruneHistory!;
  expect(pruned.pruned).toMatchObject({ leases: 2, resources: 2 });
  expect(pruned.truncated).toBe(false);

  for (const id of [oldA, oldB]) {
    expect(await exists('lease', id)).toBe(false);
    expect(await historyCount('lease', id)).toEqual({ events: 0, commands: 0 });
  }
  for (const id of prunable) {
    expect(await exists('resource', id)).toBe(false);
    expect(await historyCount('resource', id)).toEqual({ events: 0, commands: 0 });
  }
  for (const id of named) expect(await exists('resource', id)).toBe(true);
  expect(await exists('lease', recent)).toBe(true);
  expect(await exists('lease', lateGrant)).toBe(true);
  expect((await historyCount('lease', lateGrant)).commands).toBeGreaterThan(0);
  expect(await exists('lease', live)).toBe(true);
  expect(await historyCount('lease', live)).toEqual(liveBefore);
  expect(await historyCount('resource', liveResource)).toEqual(liveResourceBefore);
  expect(await historyCount('blueprint', b.id)).toEqual(blueprintBefore);
  const survivors = await db()
    .selectFrom('commands')
    .select(['id', 'caused_by'])
    .where(
      'id',
      'in',
      linked.map((c) => c.id),
    )
    .execute();
  const survivingIds = new Set(survivors.map((c) => c.id));
  // A linked command survives unless it belonged to a pruned resource; its link is gone.
  for (const c of linked) {
    if (c.target_kind === 'resource' && prunable.includes(c.target_id)) continue;
    expect(survivingIds.has(c.id), `command ${c.id} of ${c.target_kind} ${c.target_id}`).toBe(true);
  }
  expect(survivors.every((c) => c.caused_by === null)).toBe(true);

  // Nothing more to prune: the next pass finds nothing.
  expect((await hand.pass()).steps.pruneHistory!.found).toBe(0);
  // A shorter retention reaches the recent lease, and then its resource, old already.
  expect((await hand.pass({ retentionMs: 5 * 24 * 3600 * 1000 })).steps.pruneHistory!.pruned).toMatchObject({ leases: 1, resources: 1 });
  expect(await exists('lease', recent)).toBe(false);
  expect(await exists('resource', named[0]!)).toBe(false);
});

test('old pass records are pruned with the same retention', async () => {
  const old = await db()
    .insertInto('gc_passes')
    .values({
      trigger: 'cli',
      status: 'done',
      started_at: new Date(Date.now() - 40 * 86_400_000),
      finished_at: new Date(Date.now() - 40 * 86_400_000),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const pass = await hand.pass();
  expect(pass.steps.pruneHistory!.pruned!.gc_passes).toBe(1);
  expect(await db().selectFrom('gc_passes').select('id').where('id', '=', old.id).executeTakeFirst()).toBeUndefined();
  expect(await db().selectFrom('gc_passes').select('id').where('id', '=', pass.id).executeTakeFirst()).toBeDefined();
});
