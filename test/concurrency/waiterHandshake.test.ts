import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { ObjectKind } from '../../migrations/schema.ts';
import { handDrainedDatabase } from '../helpers/drainByHand.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { createLeases, releaseLease, simulatedBlueprint } from './support/fixtures.ts';

/**
 * The handshake that keeps a freed slot and a new waiter from missing each
 * other, at its narrowest: the blueprint has decided, inside its transaction,
 * that a lease must wait, and a lease gives back the last slot at that
 * very moment. The return must wait for the blueprint's decision and then
 * see the waiter. Drains run in this process, one step at a time, and the test
 * plays the blueprint's side of that one transaction by hand (its lock, its
 * waiter row) to hold it open.
 */
const { database, drain } = handDrainedDatabase();

/** Drains every object with ready commands, but those of `kinds` left alone, until none is left. */
async function drainAllBut(leftAlone: ObjectKind[]): Promise<void> {
  for (;;) {
    const { rows } = await sql<{ kind: ObjectKind; id: number }>`
      select distinct target_kind as kind, target_id as id from commands
      where status in ('queued', 'running') and not_before <= now() and target_kind <> all(${leftAlone}::text[])
    `.execute(database().db);
    if (rows.length === 0) return;
    for (const { kind, id } of rows) await drain().drain(kind, id);
  }
}

test('a slot freed while the blueprint is deciding that a lease waits goes to that lease', async () => {
  const db = database().db;
  const blueprint = await simulatedBlueprint(db, 'handshake', { maxResources: 1, leasesPerResource: 1 });
  const [holder] = await createLeases(db, blueprint, 1);
  await drainAllBut([]);
  const [waiter] = await createLeases(db, blueprint, 1);
  await releaseLease(db, holder!.id);
  // The holder's release is queued; the waiter's need_resource sits at the blueprint.
  await drainAllBut(['lease', 'blueprint']);

  const blueprintSide = await database().pool.connect();
  try {
    await blueprintSide.query('begin');
    await blueprintSide.query('select id from blueprints where id = $1 for no key update', [blueprint.id]);
    await blueprintSide.query('insert into blueprint_waiters (blueprint_id, lease_id, since) values ($1, $2, now())', [blueprint.id, waiter!.id]);
    const freeing = drain().drain('lease', holder!.id);
    await waitFor('the release to wait for the blueprint', async () => {
      const { rows } = await sql<{ waiting: boolean }>`
        select exists (select 1 from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()) as waiting
      `.execute(db);
      return rows[0]!.waiting;
    });
    await blueprintSide.query('commit');
    await freeing;
  } finally {
    blueprintSide.release();
  }

  const told = await db.selectFrom('commands').select('kind').where('target_kind', '=', 'blueprint').where('kind', '=', 'slot_freed').execute();
  expect(told).toEqual([{ kind: 'slot_freed' }]);
  await drainAllBut([]);
  const served = await db.selectFrom('leases').select('state').where('id', '=', waiter!.id).executeTakeFirstOrThrow();
  expect(served.state).toBe('active');
});
