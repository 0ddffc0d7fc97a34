import { sql } from 'kysely';
import type { GcPass, StepReport } from './GcPass.ts';

type PrunedKind = 'lease' | 'resource';

/** What a pass counts as pruned, in the order it is reported. */
export const PRUNED = ['leases', 'resources', 'events', 'commands', 'gc_passes'] as const;

/**
 * One batch of destroyed objects of a kind whose last change is older than
 * the retention, and nothing else: a live object keeps all of its history,
 * however old. An object with a command still unsettled (a late grant to a
 * destroyed lease) is kept until that settles; so is one another row still
 * points at (a slot, a waiter, a lease naming its resource).
 */
async function prunableBatch(pass: GcPass, kind: PrunedKind): Promise<number[]> {
  const cutoff = sql`now() - make_interval(secs => ${pass.settings.retentionMs / 1000}::float8)`;
  const unsettled = (alias: string) => sql`not exists (
    select 1 from commands c
    where c.target_kind = ${kind} and c.target_id = ${sql.ref(`${alias}.id`)} and c.status in ('queued', 'running'))`;
  const query =
    kind === 'lease'
      ? sql<{ id: number }>`
          select l.id from leases l
          where l.state = 'destroyed' and l.updated_at < ${cutoff} and ${unsettled('l')}
            and not exists (select 1 from resource_slots s where s.lease_id = l.id)
            -- A released lease's row in its blueprint's line goes when the blueprint next serves that far.
            and not exists (select 1 from blueprint_waiters w where w.lease_id = l.id)
          order by l.updated_at limit ${pass.settings.batchSize}`
      : sql<{ id: number }>`
          select r.id from resources r
          where r.state = 'destroyed' and r.updated_at < ${cutoff} and ${unsettled('r')}
            and not exists (select 1 from resource_slots s where s.resource_id = r.id)
            and not exists (select 1 from leases l where l.resource_id = r.id)
          order by r.updated_at limit ${pass.settings.batchSize}`;
  const { rows } = await query.execute(pass.db);
  return rows.map((r) => r.id);
}

const OBJECT_TABLE = { lease: 'leases', resource: 'resources' } as const;

/**
 * Removes one batch of objects with their events and commands, in one
 * transaction. The objects go first, and only those still destroyed with
 * nothing unsettled in their queue (a message may have reached one since the
 * batch was read); their history follows. Commands of other objects that
 * point at a removed command (caused_by, coalesced_into) lose only that
 * link, by the foreign keys' `on delete set null`; their own reasons still
 * name the object.
 */
async function pruneBatch(pass: GcPass, kind: PrunedKind, ids: number[]): Promise<Record<string, number>> {
  return pass.db.transaction().execute(async (trx): Promise<Record<string, number>> => {
    const { rows } = await sql<{ id: number }>`
      delete from ${sql.table(OBJECT_TABLE[kind])} o
      where o.id = any(${ids}::bigint[]) and o.state = 'destroyed'
        and not exists (
          select 1 from commands c
          where c.target_kind = ${kind} and c.target_id = o.id and c.status in ('queued', 'running'))
      returning o.id
    `.execute(trx);
    const gone = rows.map((r) => r.id);
    if (gone.length === 0) return {};
    const events = await trx.deleteFrom('events').where('target_kind', '=', kind).where('target_id', 'in', gone).executeTakeFirst();
    const commands = await trx.deleteFrom('commands').where('target_kind', '=', kind).where('target_id', 'in', gone).executeTakeFirst();
    return {
      [OBJECT_TABLE[kind]]: gone.length,
      events: Number(events.numDeletedRows),
      commands: Number(commands.numDeletedRows),
    };
  });
}

/**
 * Retention: destroyed leases, then destroyed resources (a lease row names
 * its resource, so leases go first), with all their events and commands,
 * once older than the retention; then the collector's own old pass records.
 * In batches, each its own short transaction, until nothing is left or the
 * pass's time is up.
 */
export async function pruneHistory(pass: GcPass): Promise<StepReport> {
  const pruned: Record<string, number> = Object.fromEntries(PRUNED.map((what) => [what, 0]));
  let found = 0;
  for (const kind of ['lease', 'resource'] as const) {
    for (;;) {
      if (pass.outOfTime) return { found, actions: [], pruned, truncated: true };
      const ids = await prunableBatch(pass, kind);
      if (ids.length === 0) break;
      found += ids.length;
      for (const [what, n] of Object.entries(await pruneBatch(pass, kind, ids))) pruned[what] = (pruned[what] ?? 0) + n;
      if (ids.length < pass.settings.batchSize) break;
    }
  }
  const passes = await pass.db
    .deleteFrom('gc_passes')
    .where('finished_at', '<', sql<Date>`now() - make_interval(secs => ${pass.settings.retentionMs / 1000}::float8)`)
    .executeTakeFirst();
  pruned.gc_passes = Number(passes.numDeletedRows);
  return { found, actions: [], pruned, truncated: false };
}
