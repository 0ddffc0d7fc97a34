import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { countedAtBlueprint, countedOverall } from '../../src/db/countedLeases.ts';
import { takeSlot } from '../../src/drain/sql/takeSlot.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { setTeam } from '../../src/objects/teams.ts';
import { handDrainedDatabase } from '../helpers/drainByHand.ts';

// What a team's share and its quotas count: each lease holding a slot or
// sent to take one, once. Drained by hand to the moment between the
// blueprint sending a lease to its resource and the resource's acquire,
// then the acquire's own write is made in a transaction the way a drain
// step makes it, before the step commits.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { drain, db } = handDrainedDatabase({ poolSize: 4 });

test('a lease whose acquire a step has decided, but not yet committed, is counted once: by its slot, not also by its acquire', async () => {
  await setTeam(db(), { name: 'ci' }, alice);
  const blueprint = await createBlueprint(
    db(),
    { name: 'counted', driver: 'simulated', maxResources: 1, leasesPerResource: 2, settings: { latencyMs: { min: 0, max: 0 } } },
    alice,
  );
  await createLease(db(), { blueprint: 'counted', holder: 'first', team: 'ci' }, alice);
  await drain().all();
  const resource = await db().selectFrom('resources').selectAll().where('blueprint_id', '=', blueprint.id).executeTakeFirstOrThrow();
  // The second lease's request is decided: its acquire waits in the resource's queue.
  const { lease: second } = await createLease(db(), { blueprint: 'counted', holder: 'second', team: 'ci' }, alice);
  await drain().drain('lease', second.id);
  await drain().drain('blueprint', blueprint.id);
  const acquire = await db()
    .selectFrom('commands')
    .select('status')
    .where('target_kind', '=', 'resource')
    .where('target_id', '=', resource.id)
    .where('kind', '=', 'acquire')
    .where(sql`(payload->>'leaseId')::bigint`, '=', second.id)
    .executeTakeFirstOrThrow();
  expect(acquire.status).toBe('queued');
  const both = [
    { team: 'ci', holder: 'first', blueprintId: blueprint.id, n: 1 },
    { team: 'ci', holder: 'second', blueprintId: blueprint.id, n: 1 },
  ];
  const sorted = (rows: ReadonlyArray<{ holder: string }>) => [...rows].sort((a, b) => a.holder.localeCompare(b.holder));
  expect(sorted(await countedAtBlueprint(db(), blueprint.id))).toEqual(both);

  // The resource's step takes the slot (as its acquire decides) and, before
  // it commits the acquire done, its blueprint's decision in the same
  // transaction counts.
  const trx = await db().startTransaction().execute();
  try {
    const taken = await takeSlot(trx, resource, second.id);
    expect(taken.slot).toBe(1);
    expect(sorted(await countedAtBlueprint(trx, blueprint.id))).toEqual(both);
    expect(sorted(await countedOverall(trx, ['ci']))).toEqual(both);
  } finally {
    // Undone: the step was only looked into.
    await trx.rollback().execute();
  }
  await drain().all();
  expect(sorted(await countedAtBlueprint(db(), blueprint.id))).toEqual(both);
});
