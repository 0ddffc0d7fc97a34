import { CompiledQuery } from 'kysely';
import { PREPARED_MARK } from '../../db/PreparingClient.ts';

/** What a resource was left with once slots of it were given back (see slotsLeftStatement). */
export interface SlotsLeft {
  readonly resourceId: number;
  readonly blueprintId: number;
  /** Its state, read after the returns. */
  readonly state: string;
  /** Its slot rows, as this statement's snapshot has them (rows other transactions are deleting included). */
  readonly slots: number;
  /** No slot row of it is left that another transaction is not deleting: a return here may have emptied it. */
  readonly emptied: boolean;
  /** A lease waits in its blueprint's line (as waitingLeases in src/db/waitingLeases.ts reads the line). */
  readonly waiters: boolean;
  /** Any quota exists at all. */
  readonly quotas: boolean;
}

/**
 * What the resources that slots were just given back to are left with,
 * for what those returns must tell (slotsGivenBack.ts). It runs as a
 * statement of its own after the returns' delete (returnSlots.ts), so its
 * snapshot is taken once the delete has locked the blueprints' rows: it
 * sees every lease the blueprint put in line before that, and every
 * return committed meanwhile.
 *
 * `emptied` is how a return learns that it gave back a resource's last
 * slot without the resource's lock: it key-share locks one other slot row
 * of the resource, skipping those locked. A row that another transaction
 * is deleting is locked, so it is skipped; a row nobody is deleting is
 * taken, and its lease's delete then waits for this transaction. So of
 * the returns that empty a resource between them, the one that commits
 * last always finds none left and tells the resource, whatever order they
 * ran in; an earlier one may tell it too, which costs a recount.
 *
 * The row it locks is the highest slot: a grant takes the lowest free
 * slot, so that is about the latest lease, and the least likely to be
 * given back while this transaction holds it (its return would wait for
 * this commit). Leases that end in the order they began, as a burst of
 * them does, then never wait for each other; the lowest slot, which they
 * give back first, made the next return wait for nearly every commit.
 *
 * Prepared (PREPARED_MARK) for a decision that sends it alone; in a
 * step's batch it is prepared once per connection like every drain
 * statement. Its parameter is an array, planned once (GENERIC_PLANS).
 */
export function slotsLeftStatement(resourceIds: readonly number[]): CompiledQuery {
  return CompiledQuery.raw(
    `${PREPARED_MARK} select r.id as resource_id, r.blueprint_id, r.state,
       (select count(*) from resource_slots s where s.resource_id = r.id)::int as slots,
       (select s.slot from resource_slots s where s.resource_id = r.id order by s.slot desc limit 1 for key share skip locked) is null as emptied,
       exists (select 1 from blueprint_waiters w join leases l on l.id = w.lease_id
               where w.blueprint_id = r.blueprint_id and l.state = 'pending') as waiters,
       exists (select 1 from quotas) as quotas
     from resources r where r.id = any($1::bigint[])
     order by r.id`,
    [[...resourceIds]],
  );
}

/** What the statement answered (its rows). */
export function slotsLeft(rows: readonly unknown[]): SlotsLeft[] {
  return (
    rows as { resource_id: number; blueprint_id: number; state: string; slots: number; emptied: boolean; waiters: boolean; quotas: boolean }[]
  ).map((row) => ({
    resourceId: row.resource_id,
    blueprintId: row.blueprint_id,
    state: row.state,
    slots: row.slots,
    emptied: row.emptied,
    waiters: row.waiters,
    quotas: row.quotas,
  }));
}
