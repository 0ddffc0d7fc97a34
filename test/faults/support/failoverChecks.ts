import { sql } from 'kysely';
import type { Db } from '../../../src/db/Database.ts';

/**
 * "Only the holder of an object's advisory lock writes its row", checked by
 * the database itself: a trigger on every update of a lease, resource or
 * blueprint row records the write in `unlocked_writes` when the writing
 * session does not hold that object's lock (a session or a transaction
 * lock, as pg_locks lists them). The lock is exclusive on one server, so
 * with no such write no object was drained by two workers at once, even
 * across a failover that dropped every lock while drains were in flight.
 * Installed on the primary before its standby is made, so it is on both.
 */
export async function recordUnlockedWrites(db: Db): Promise<void> {
  await sql`
    create table unlocked_writes (
      at timestamptz not null default clock_timestamp(),
      kind text not null,
      id bigint not null,
      application_name text not null
    )
  `.execute(db);
  await sql`
    create function record_unlocked_write() returns trigger language plpgsql as $$
    declare
      key bigint := object_lock_key(tg_argv[0], new.id);
    begin
      if not exists (
        select 1 from pg_locks
        where pid = pg_backend_pid() and locktype = 'advisory' and granted and objsubid = 1
          and classid = (key >> 32)::oid and objid = (key & 4294967295)::oid
      ) then
        insert into unlocked_writes (kind, id, application_name) values (tg_argv[0], new.id, current_setting('application_name'));
      end if;
      return new;
    end
    $$
  `.execute(db);
  for (const [table, kind] of [
    ['leases', 'lease'],
    ['resources', 'resource'],
    ['blueprints', 'blueprint'],
  ] as const) {
    await sql`create trigger ${sql.id(`${table}_unlocked_writes`)} before update on ${sql.table(table)}
      for each row execute function record_unlocked_write(${sql.lit(kind)})`.execute(db);
  }
}

/** The writes recordUnlockedWrites caught, one line each. */
export async function unlockedWrites(db: Db): Promise<string[]> {
  const { rows } = await sql<{ line: string }>`
    select kind || ' ' || id || ' written by ' || application_name || ' at ' || at as line from unlocked_writes order by at
  `.execute(db);
  return rows.map((r) => r.line);
}

/** Whether recordUnlockedWrites records a write of lease `leaseId` by this session, which holds no lock: the check can fail. Rolled back. */
export async function unlockedWriteSeen(db: Db, leaseId: number): Promise<boolean> {
  const rollback = new Error('rollback');
  let seen = false;
  try {
    await db.transaction().execute(async (trx) => {
      await sql`update leases set version = version where id = ${leaseId}`.execute(trx);
      seen = (await unlockedWrites(trx)).some((line) => line.startsWith(`lease ${leaseId} `));
      throw rollback;
    });
  } catch (error) {
    if (error !== rollback) throw error;
  }
  return seen;
}

/**
 * Replays every slot grant and return of a blueprint's resources from
 * their events, in the order they were written, and answers every moment a
 * slot was granted while another lease held it, or a lease was granted a
 * slot while it held one already, with the number of grants replayed.
 */
export async function slotDoubles(db: Db, blueprintId: number): Promise<{ granted: number; doubles: string[] }> {
  const events = await db
    .selectFrom('events')
    .innerJoin('resources', 'resources.id', 'events.target_id')
    .select(['events.id', 'events.target_id', 'events.type', 'events.data'])
    .where('events.target_kind', '=', 'resource')
    .where('resources.blueprint_id', '=', blueprintId)
    .where('events.type', 'in', ['slot_granted', 'slot_freed'])
    .orderBy('events.id')
    .execute();
  const holderOfSlot = new Map<string, number>();
  const slotOfLease = new Map<number, string>();
  const doubles: string[] = [];
  let granted = 0;
  for (const event of events) {
    const { leaseId, slot } = event.data as { leaseId: number; slot: number };
    const place = `resource ${event.target_id} slot ${slot}`;
    if (event.type === 'slot_granted') {
      granted++;
      const holder = holderOfSlot.get(place);
      if (holder !== undefined) doubles.push(`event ${event.id}: ${place} granted to lease ${leaseId} while lease ${holder} held it`);
      const other = slotOfLease.get(leaseId);
      if (other !== undefined) doubles.push(`event ${event.id}: lease ${leaseId} granted ${place} while it held ${other}`);
      holderOfSlot.set(place, leaseId);
      slotOfLease.set(leaseId, place);
    } else {
      if (holderOfSlot.get(place) === leaseId) holderOfSlot.delete(place);
      if (slotOfLease.get(leaseId) === place) slotOfLease.delete(leaseId);
    }
  }
  return { granted, doubles };
}
