import { sql } from 'kysely';
import type { BlueprintRow, CommandRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { makeResource } from '../../objects/makeResource.ts';
import type { FollowUp } from '../Handler.ts';
import { perStep } from '../perStep.ts';

/**
 * A blueprint's waiting line: the leases that found no free slot, served
 * oldest first. Its invariant, which the blueprint's drain restores after
 * every command it applies (see blueprintHandlers.ts):
 *
 *   no lease waits while the blueprint has room for it.
 *
 * Room is a free slot on an active resource, not already promised to an
 * acquire on its way there, or, while the blueprint is enabled, a resource it
 * may still make (live below max). A resource made for a waiter has slots for
 * the waiters behind it too (leasesPerResource of them; a driver that gives
 * it fewer refuses the rest, who ask again). So whatever made the room (a
 * raised limit, an enable, a destroyed resource, a freed slot, new
 * settings), the waiters get it, and nobody has to remember to serve them.
 *
 * Only the blueprint's drain writes the line (blueprint_waiters); it serves a
 * lease by sending an `acquire` to a resource's queue, the resource decides.
 */
export interface Serving {
  /** The blueprint's resource count after the resources made here. */
  readonly liveResources: number;
  /** What happened to each lease served, for the command's message. */
  readonly served: ReadonlyMap<number, string>;
  /** The leases left waiting, oldest first, and why they wait. */
  readonly waiting: readonly number[];
  readonly why: string;
  readonly events: ReadonlyArray<{ type: string; message: string; data?: unknown }>;
  readonly followUps: readonly FollowUp[];
}

const acquire = (resourceId: number, leaseId: number, reason: string): FollowUp => ({
  target: { kind: 'resource', id: resourceId },
  kind: 'acquire',
  payload: { leaseId },
  reason,
});

/** A lease coming to the line: it takes its place by the time it was created, as if it had waited since then. */
export interface Joining {
  readonly leaseId: number;
  readonly since: Date;
}

/**
 * Serves the line of `blueprint` (its row as the command being applied
 * leaves it) from whatever room it has, `joining` in its place among the
 * waiters. A joining lease served at once never has a row in the line; one
 * left waiting gets its row here.
 */
export async function serveWaitingLine(trx: Db, blueprint: BlueprintRow, cause: CommandRow, joining?: Joining): Promise<Serving> {
  const { line, departed, newcomer } = await waitingLine(trx, blueprint.id, joining);
  const served = new Map<number, string>();
  const events: Serving['events'][number][] = [];
  const followUps: FollowUp[] = [];
  let live = blueprint.live_resources;
  const promised = promisedInStep(trx);
  const slots: Slot[] = line.length > 0 ? await freeSlots(trx, blueprint.id, promised) : [];
  for (const leaseId of line) {
    let slot = slots.find((s) => s.free > 0);
    if (!slot && blueprint.state === 'enabled' && live < blueprint.max_resources) {
      slot = { id: await makeResource(trx, blueprint, cause, { leaseId }), free: blueprint.leases_per_resource, madeFor: leaseId };
      slots.push(slot);
      live++;
      events.push({ type: 'resource_allocated', message: `resource ${slot.id} for lease ${leaseId}`, data: { resourceId: slot.id, leaseId } });
    }
    if (!slot) break;
    slot.free--;
    promised.set(slot.id, (promised.get(slot.id) ?? 0) + 1);
    const made = slot.madeFor === leaseId;
    served.set(
      leaseId,
      made
        ? `allocating resource ${slot.id} for lease ${leaseId} (${live} of ${blueprint.max_resources})`
        : `sent lease ${leaseId} to resource ${slot.id}`,
    );
    followUps.push(acquire(slot.id, leaseId, made ? `made for lease ${leaseId}` : `lease ${leaseId} waited for a slot`));
  }
  // A newcomer has no row to delete; one left waiting gets its row.
  const leaving = [...departed, ...served.keys()].filter((leaseId) => leaseId !== newcomer?.leaseId);
  if (leaving.length > 0) await trx.deleteFrom('blueprint_waiters').where('lease_id', 'in', leaving).execute();
  if (newcomer && !served.has(newcomer.leaseId)) {
    await trx
      .insertInto('blueprint_waiters')
      .values({ blueprint_id: blueprint.id, lease_id: newcomer.leaseId, since: newcomer.since })
      .onConflict((oc) => oc.column('lease_id').doNothing())
      .execute();
  }
  const noun = blueprint.state === 'enabled' ? 'at its limit' : `blueprint ${blueprint.state}: it makes no resources`;
  return {
    liveResources: live,
    served,
    waiting: line.filter((leaseId) => !served.has(leaseId)),
    why: `${noun}; ${live} of ${blueprint.max_resources} live, no free slot`,
    events,
    followUps,
  };
}

/**
 * The leases waiting at the blueprint, oldest first, and the rows of those
 * that left the line (released while they waited). Every other reader of the
 * line already passes over those (see waitingLeases); the blueprint, the
 * line's only writer, removes them.
 */
async function waitingLine(
  trx: Db,
  blueprintId: number,
  joining?: Joining,
): Promise<{ line: number[]; departed: number[]; newcomer: Joining | undefined }> {
  const rows = await trx
    .selectFrom('blueprint_waiters as w')
    .innerJoin('leases as l', 'l.id', 'w.lease_id')
    .select(['w.lease_id', 'w.since', 'l.state'])
    .where('w.blueprint_id', '=', blueprintId)
    .orderBy('w.since')
    .orderBy('w.lease_id')
    .execute();
  const stillPending = (r: { state: string }) => r.state === 'pending';
  const waiting = rows.filter(stillPending);
  // A lease asking again (after a refusal) may already have its row.
  const newcomer = joining && !rows.some((r) => r.lease_id === joining.leaseId) ? joining : undefined;
  if (newcomer) {
    // In the line's order (since, then lease id); microseconds past the
    // millisecond do not matter here: leases created in the same millisecond
    // are ordered by id either way.
    const at = waiting.findIndex(
      (r) => r.since.getTime() > newcomer.since.getTime() || (r.since.getTime() === newcomer.since.getTime() && r.lease_id > newcomer.leaseId),
    );
    waiting.splice(at < 0 ? waiting.length : at, 0, { lease_id: newcomer.leaseId, since: newcomer.since, state: 'pending' });
  }
  return { line: waiting.map((r) => r.lease_id), departed: rows.filter((r) => !stillPending(r)).map((r) => r.lease_id), newcomer };
}

/** A resource the line may be sent to, and how many of its slots are still unpromised. */
interface Slot {
  readonly id: number;
  free: number;
  /** The lease a resource was made for here. */
  readonly madeFor?: number;
}

/**
 * The slots each resource has been promised by decisions of this step (an
 * acquire sent), which its commit has not written yet: a run of the
 * blueprint's decisions must not promise a slot twice.
 */
const promisedInStep = perStep(() => new Map<number, number>());

/**
 * The blueprint's active resources with free slots, less the slots already
 * promised to acquires still in their queues (a resource whose acquire finds
 * its lease gone offers the slot to the line again) and to those this step
 * sends (`promised`).
 */
async function freeSlots(trx: Db, blueprintId: number, promised: ReadonlyMap<number, number>): Promise<Slot[]> {
  const rows = await trx
    .selectFrom('resources as r')
    .select([
      'r.id',
      sql<number>`r.capacity - r.used_slots - (
        select count(*) from commands c
        where c.target_kind = 'resource' and c.target_id = r.id and c.kind = 'acquire' and c.status in ('queued', 'running'))::int`.as('free'),
    ])
    .where('r.blueprint_id', '=', blueprintId)
    .where('r.state', '=', 'active')
    .whereRef('r.used_slots', '<', 'r.capacity')
    .orderBy('r.id')
    .execute();
  return rows.map((r) => ({ id: r.id, free: r.free - (promised.get(r.id) ?? 0) })).filter((r) => r.free > 0);
}
