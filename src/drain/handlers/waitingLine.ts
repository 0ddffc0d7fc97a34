import { sql } from 'kysely';
import type { BlueprintRow, CommandRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { makeResource } from '../../objects/makeResource.ts';
import type { FollowUp } from '../Handler.ts';
import { perStep } from '../perStep.ts';
import { waitingLeases } from '../sql/freeSlot.ts';
import { forgetRequestingLeases } from '../reads/requestingLease.ts';

/**
 * A blueprint's waiting line: the leases that found no free slot, served in
 * the order of their places (the request time less what the lease's
 * priority is worth, domain/priority.ts). Its invariant, which the
 * blueprint's drain restores after every command it applies (see
 * blueprintHandlers.ts):
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
  /** How many leases still wait, the joining one included. */
  readonly waiting: LineCount;
  /** For a joining lease left waiting: how many wait ahead of it. */
  readonly joinedAhead: LineCount | undefined;
  /** Why they wait. */
  readonly why: string;
  readonly events: ReadonlyArray<{ type: string; message: string; data?: unknown }>;
  readonly followUps: readonly FollowUp[];
}

/**
 * A count of waiting leases, exact up to COUNT_CAP: a decision reads the
 * line only as far as it serves it, so what it costs does not grow with the
 * line (the web UI's lease and blueprint pages give the exact place).
 */
export interface LineCount {
  readonly n: number;
  /** True when there are more than `n`. */
  readonly orMore: boolean;
}

/** The most waiting leases a decision counts for its message. */
const COUNT_CAP = 100;
/** How many of the line's rows one read takes, from the head on, while there is room to serve them. */
const PAGE = 64;

const acquire = (resourceId: number, leaseId: number, reason: string): FollowUp => ({
  target: { kind: 'resource', id: resourceId },
  kind: 'acquire',
  payload: { leaseId },
  reason,
});

/**
 * A lease coming to the line: it takes its place (`since`) by the time it
 * was requested less what its priority is worth (domain/priority.ts), as
 * if it had waited since then.
 */
export interface Joining {
  readonly leaseId: number;
  readonly since: Date;
  readonly requestedAt: Date;
  readonly priority: number;
}

/** A row of the line as read: `key` is its place (`since` to the microsecond, as text) for reading on after it. */
interface LineRow {
  readonly lease_id: number;
  readonly since: Date;
  readonly key: string;
  readonly state: string;
  readonly priority: number;
  readonly requested_at: Date;
}

/** Why a waiting lease was the one served, as the decision records it: "priority 5, waited 41 s". */
function whyChosen(lease: { priority: number; requestedAt: Date }, now: number): string {
  return `priority ${lease.priority}, waited ${Math.max(0, Math.round((now - lease.requestedAt.getTime()) / 1000))} s`;
}

/**
 * Whether `joining` comes before `row` in the line (since, then lease id);
 * microseconds past the millisecond do not matter here: leases created in
 * the same millisecond are ordered by id either way.
 */
const comesBefore = (joining: Joining, row: LineRow) =>
  joining.since.getTime() < row.since.getTime() || (joining.since.getTime() === row.since.getTime() && joining.leaseId < row.lease_id);

/**
 * Serves the line of `blueprint` (its row as the command being applied
 * leaves it) from whatever room it has, `joining` in its place among the
 * waiters. A joining lease served at once never has a row in the line; one
 * left waiting gets its row here.
 *
 * The line is read from its head, a page at a time, only while there is
 * room: a decision that serves nobody reads none of it, so a long line
 * costs a decision no more than a short one. Rows of leases that left the
 * line (released while they waited) are removed as they are read; every
 * other reader of the line passes over the rest (see waitingLeases).
 */
export async function serveWaitingLine(trx: Db, blueprint: BlueprintRow, cause: CommandRow, joining?: Joining): Promise<Serving> {
  let live = blueprint.live_resources;
  const why = () =>
    `${blueprint.state === 'enabled' ? 'at its limit' : `blueprint ${blueprint.state}: it makes no resources`}; ` +
    `${live} of ${blueprint.max_resources} live, no free slot`;
  // With nobody joining, an empty line needs no room counted.
  let page = joining ? undefined : await linePage(trx, blueprint.id);
  if (page?.length === 0)
    return {
      liveResources: live,
      served: new Map(),
      waiting: { n: 0, orMore: false },
      joinedAhead: undefined,
      why: why(),
      events: [],
      followUps: [],
    };

  const served = new Map<number, string>();
  const events: Serving['events'][number][] = [];
  const followUps: FollowUp[] = [];
  const promised = promisedInStep(trx);
  const slots = await freeSlots(trx, blueprint.id, promised);
  const mayMake = () => blueprint.state === 'enabled' && live < blueprint.max_resources;
  const hasRoom = () => slots.some((s) => s.free > 0) || mayMake();
  const now = Date.now();
  /**
   * Serves one lease from the room left, making a resource if it may. `why`
   * it was chosen, when it was chosen over others in the line (a lease
   * served the moment it asked, with nobody waiting behind, has none).
   */
  const serve = async (leaseId: number, why?: string) => {
    let slot = slots.find((s) => s.free > 0);
    if (!slot && mayMake()) {
      slot = { id: await makeResource(trx, blueprint, cause, { leaseId }), free: blueprint.leases_per_resource, madeFor: leaseId };
      slots.push(slot);
      live++;
      events.push({ type: 'resource_allocated', message: `resource ${slot.id} for lease ${leaseId}`, data: { resourceId: slot.id, leaseId } });
    }
    if (!slot) return;
    slot.free--;
    promised.set(slot.id, (promised.get(slot.id) ?? 0) + 1);
    const made = slot.madeFor === leaseId;
    const count = `${live} of ${blueprint.max_resources}`;
    served.set(
      leaseId,
      made
        ? `allocating resource ${slot.id} for lease ${leaseId} (${why ? `${count}; ${why}` : count})`
        : `sent lease ${leaseId} to resource ${slot.id}${why ? ` (${why})` : ''}`,
    );
    const reason = made
      ? `made for lease ${leaseId}${why ? ` (${why})` : ''}`
      : why
        ? `lease ${leaseId} chosen for a slot: ${why}`
        : `lease ${leaseId} asked for a slot`;
    followUps.push(acquire(slot.id, leaseId, reason));
  };

  // The line from its head while there is room (and a page already read,
  // to its end), the joining lease served in its place; what was read and
  // not served still waits.
  let newcomer = joining;
  let joinedHasRow = false;
  let endReached = false;
  let pagesRead = 0;
  let last: LineRow | undefined;
  const departed: number[] = [];
  const unserved: LineRow[] = [];
  while (!endReached && (page !== undefined || hasRoom())) {
    page ??= await linePage(trx, blueprint.id, last);
    pagesRead++;
    endReached = page.length < PAGE;
    for (const row of page) {
      last = row;
      if (row.lease_id === joining?.leaseId) {
        // A lease asking again (after a refusal) may already have its row.
        joinedHasRow = true;
        continue;
      }
      if (newcomer && comesBefore(newcomer, row) && hasRoom()) {
        await serve(newcomer.leaseId, whyChosen(newcomer, now));
        newcomer = undefined;
      }
      if (row.state !== 'pending') departed.push(row.lease_id);
      else if (hasRoom()) await serve(row.lease_id, whyChosen({ priority: row.priority, requestedAt: row.requested_at }, now));
      else unserved.push(row);
    }
    page = undefined;
  }
  if (newcomer && endReached && hasRoom()) await serve(newcomer.leaseId);
  if (served.size > 0) forgetRequestingLeases(trx);

  const leaving = [...departed, ...served.keys()].filter((leaseId) => leaseId !== joining?.leaseId || joinedHasRow);
  if (leaving.length > 0) await trx.deleteFrom('blueprint_waiters').where('lease_id', 'in', leaving).execute();
  const joinedWaits = joining !== undefined && !served.has(joining.leaseId);
  if (joinedWaits) {
    await trx
      .insertInto('blueprint_waiters')
      .values({ blueprint_id: blueprint.id, lease_id: joining.leaseId, since: joining.since })
      .onConflict((oc) => oc.column('lease_id').doNothing())
      .execute();
  }
  // Counted from what was read when the read got that far; otherwise by a count that stops at COUNT_CAP.
  const readPast = (j: Joining) => endReached || (last !== undefined && comesBefore(j, last));
  const joinedAhead = !joinedWaits
    ? undefined
    : readPast(joining)
      ? { n: unserved.filter((row) => !comesBefore(joining, row)).length, orMore: false }
      : await countAhead(trx, blueprint.id, joining);
  // Only a joining lease with no room reads no page: it waits, behind those counted ahead of it.
  const waiting = pagesRead > 0 ? { n: unserved.length + (joinedWaits ? 1 : 0), orMore: !endReached } : { n: joinedAhead!.n + 1, orMore: true };
  return { liveResources: live, served, waiting, joinedAhead, why: why(), events, followUps };
}

/** The line's rows after `after` (from its head without), in the order of their places, with their leases' states. */
function linePage(trx: Db, blueprintId: number, after?: LineRow): Promise<LineRow[]> {
  return trx
    .selectFrom('blueprint_waiters as w')
    .innerJoin('leases as l', 'l.id', 'w.lease_id')
    .select(['w.lease_id', 'w.since', sql<string>`w.since::text`.as('key'), 'l.state', 'l.priority', 'l.created_at as requested_at'])
    .where('w.blueprint_id', '=', blueprintId)
    .$if(after !== undefined, (qb) => qb.where(sql<boolean>`(w.since, w.lease_id) > (${after!.key}::timestamptz, ${after!.lease_id}::bigint)`))
    .orderBy('w.since')
    .orderBy('w.lease_id')
    .limit(PAGE)
    .execute();
}

/** How many leases wait at the blueprint ahead of `joining`, counted up to COUNT_CAP. */
async function countAhead(trx: Db, blueprintId: number, joining: Joining): Promise<LineCount> {
  const ahead = await waitingLeases(trx)
    .select('w.lease_id')
    .where('w.blueprint_id', '=', blueprintId)
    .where(sql<boolean>`(w.since, w.lease_id) < (${joining.since.toISOString()}::timestamptz, ${joining.leaseId}::bigint)`)
    .limit(COUNT_CAP + 1)
    .execute();
  return ahead.length > COUNT_CAP ? { n: COUNT_CAP, orMore: true } : { n: ahead.length, orMore: false };
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
