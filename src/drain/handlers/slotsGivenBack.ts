import type { Db } from '../../db/Database.ts';
import { accepts, grantsSlots } from '../../domain/lifecycle.ts';
import type { LockedBatch, OutcomeEvent } from '../Handler.ts';
import { type FollowUp, send } from '../messages.ts';
import { perStep } from '../../db/perStep.ts';
import { returnSlotsStatement, type SlotReturn, slotsReturned } from '../sql/returnSlots.ts';
import { type SlotsLeft, slotsLeft, slotsLeftStatement } from '../sql/slotsLeft.ts';
import { blueprintsWhereTeamWaits } from '../../db/teamWaiters.ts';
import { waitersAndQuotas } from '../../db/waitingLeases.ts';

/**
 * Slots given back. The slot rows are the truth about a resource's
 * capacity, and only the resource inserts them (its `acquire`, under its
 * lock). A delete can only make room, so a lease that ends deletes its own
 * slot row, in its own step, and tells the resource only what the
 * resource must hear (docs/decisions/0028-a-lease-gives-its-slot-back-itself.md):
 * `count_slots` when it may have given back the last slot (the resource
 * keeps when it went idle, and a released one is destroyed once empty).
 * It tells the blueprint itself when a lease waits for the slot
 * (`slot_freed`), and the blueprints where its team's quota held waiters
 * back (`serve_waiters`). On a blueprint that cleans between leases the
 * resource takes the slot back itself (`release_slot`), to clean it first.
 */

export type { SlotReturn } from '../sql/returnSlots.ts';

/** A slot given back: the slot freed, and what its resource was left with. */
export interface SlotGivenBack {
  readonly slot: number;
  readonly left: SlotsLeft;
}

/** The returns the step's batch made, by resource and lease: the slot each freed (undefined: the lease held none there). */
const returnsInStep = perStep(() => new Map<string, number | undefined>());
/** What the resources returned to in this step were left with. */
const leftInStep = perStep(() => new Map<number, SlotsLeft>());
const returnKey = (resourceId: number, leaseId: number) => `${resourceId}:${leaseId}`;

/** The two statements of a set of returns: the deletes (with the blueprints' rows share-locked), then what they left. */
function returnStatements(returns: readonly SlotReturn[]) {
  return [returnSlotsStatement(returns), slotsLeftStatement([...new Set(returns.map((r) => r.resourceId))])];
}

/** Keeps what the two statements answered for the step's decisions. */
function keepReturns(trx: Db, [returned = [], left = []]: readonly (readonly unknown[])[]): void {
  const step = returnsInStep(trx);
  for (const r of slotsReturned(returned)) {
    const key = returnKey(r.resourceId, r.leaseId);
    // A lease's second return in one statement finds the row gone: the first answer stands.
    if (!step.has(key) || r.slot !== undefined) step.set(key, r.slot);
  }
  const asked = waitersAsked(trx);
  for (const l of slotsLeft(left)) {
    leftInStep(trx).set(l.resourceId, l);
    // Read under the blueprint's share lock, which the returns took: every later question of the step reads the same.
    asked.locked.add(l.blueprintId);
    if (!asked.answers.has(l.blueprintId)) asked.answers.set(l.blueprintId, Promise.resolve(l.waiters));
    quotasAsked(trx).answer ??= Promise.resolve(l.quotas);
  }
}

/**
 * The step's slot returns as a LockedBatch: one set of statements for
 * every head whose command gives a slot back (`returnOf`), sent in the
 * round trip that opens the step's transaction. `returnOf` must name only
 * returns the command's decision is sure to make (the delete is a write);
 * a decision it leaves out gives its slot back alone (giveBackSlot).
 */
export function slotReturnsBatch<C>(returnOf: (ctx: C) => SlotReturn | undefined): LockedBatch<C> {
  return {
    statements(heads) {
      const returns = heads.map(returnOf).filter((r) => r !== undefined);
      return returns.length > 0 ? returnStatements(returns) : [];
    },
    keep: keepReturns,
  };
}

/**
 * Gives a lease's slot on a resource back: the slot it held there, now
 * free, and what the resource was left with; undefined when it held none
 * there. The step's batch made the return if it covered this one;
 * otherwise it is made now, alone. Each return is answered once: a second
 * one of the same lease in the step finds nothing.
 */
export async function giveBackSlot(trx: Db, r: SlotReturn): Promise<SlotGivenBack | undefined> {
  const step = returnsInStep(trx);
  const key = returnKey(r.resourceId, r.leaseId);
  if (!step.has(key)) {
    const results = [];
    for (const statement of returnStatements([r])) results.push((await trx.executeQuery(statement)).rows);
    keepReturns(trx, results);
  }
  const slot = step.get(key);
  step.delete(key);
  const left = leftInStep(trx).get(r.resourceId);
  return slot === undefined || left === undefined ? undefined : { slot, left };
}

/** The event that records a slot given back, on its resource's timeline. */
export function slotFreedEvent(resourceId: number, leaseId: number, slot: number, how = ''): OutcomeEvent {
  return {
    type: 'slot_freed',
    message: `slot ${slot} from lease ${leaseId}${how}`,
    data: { leaseId, slot },
    on: { kind: 'resource', id: resourceId },
  };
}

/**
 * What a lease that gave its slot back itself must tell (see the top of
 * this file): its blueprint, if a lease waits in its line and the resource
 * grants slots (its state read after the return: a resource put back in
 * service meanwhile counts its slots under locks that wait for the return,
 * see countSlotsLocked); the blueprints where its team waits behind a
 * quota; and the resource, if this may have been its last slot and its
 * state counts slots (a broken one is being destroyed whatever it holds).
 */
export async function tellOfSlotGivenBack(trx: Db, leaseId: number, given: SlotGivenBack): Promise<FollowUp[]> {
  const { left } = given;
  const told = toldInStep(trx);
  const offer = grantsSlots('resource', left.state) && left.waiters && once(told.blueprints, left.blueprintId);
  const count = left.emptied && accepts('resource', left.state, 'count_slots') && once(told.counts, left.resourceId);
  return [
    ...(offer ? [slotFreed(left.resourceId, left.blueprintId)] : []),
    ...(await quotaFreed(trx, leaseId)),
    ...(count ? [send.resource.count_slots(left.resourceId, `lease ${leaseId} gave back what may be its last slot`)] : []),
  ];
}

/**
 * The blueprints and resources the step's returns have told already: one
 * message each is enough, as they commit together (a blueprint serves its
 * whole line from every free slot it counts; a resource counts all its
 * slots).
 */
const toldInStep = perStep(() => ({ blueprints: new Set<number>(), counts: new Set<number>() }));
/** Whether `id` is told for the first time in the step (and, if so, notes it). */
function once(told: Set<number>, id: number): boolean {
  if (told.has(id)) return false;
  told.add(id);
  return true;
}

/** Tells the blueprint that a resource of it has a slot its line could take. */
export const slotFreed = (resourceId: number, blueprintId: number): FollowUp =>
  send.blueprint.slot_freed(blueprintId, { resourceId }, `resource ${resourceId} has a free slot`);

/**
 * Does the blueprint have leases waiting? Lock the blueprint's row FOR SHARE
 * first: the blueprint's drain holds it FOR NO KEY UPDATE while it decides to
 * make a lease wait, so either we see that waiter, or the blueprint sees the slot we
 * are freeing. Without the row lock, both could miss each other and the
 * waiter would wait for the next release.
 *
 * Two statements, not one: under READ COMMITTED a statement reads with the
 * snapshot it took when it started, so a waiter-lookup in the same statement
 * as the lock would still miss the waiter committed while we waited for the
 * lock. The lookup after it takes a fresh snapshot.
 */
export function blueprintHasWaiters(trx: Db, blueprintId: number): Promise<boolean> {
  // Asked once per blueprint and step: from the row lock on, no lease can
  // join the line until this transaction ends (joining takes the
  // blueprint's row FOR NO KEY UPDATE), so every later decision of the step
  // would read the same answer, at two round trips each. A waiter that
  // leaves meanwhile costs at most a slot_freed that finds nobody.
  const step = waitersAsked(trx);
  let answer = step.answers.get(blueprintId);
  if (!answer) {
    // A slot's return has taken the lock already (returnSlotsStatement).
    const locked = step.locked.has(blueprintId)
      ? Promise.resolve()
      : trx.selectFrom('blueprints').select('id').where('id', '=', blueprintId).forShare().execute();
    answer = locked.then(async () => {
      const { waiters, quotas } = await waitersAndQuotas(trx, blueprintId);
      quotasAsked(trx).answer ??= Promise.resolve(quotas);
      return waiters;
    });
    step.answers.set(blueprintId, answer);
  }
  return answer;
}
const waitersAsked = perStep(() => ({ answers: new Map<number, Promise<boolean>>(), locked: new Set<number>() }));

/**
 * A slot given back stops counting against its lease's team's quotas: the
 * blueprints where a quota held the team's waiters back serve their lines
 * again (see blueprintsWhereTeamWaits).
 */
export async function quotaFreed(trx: Db, leaseId: number): Promise<FollowUp[]> {
  if (!(await anyQuota(trx))) return [];
  const blueprints = await blueprintsWhereTeamWaits(trx, { leaseId }, { anyQuota: true });
  return blueprints.map((id) => send.blueprint.serve_waiters(id, `lease ${leaseId} gave its slot back: its team counts one lease fewer`));
}

/**
 * Whether any quota exists, asked once a step (or answered with the
 * blueprint's waiters): most fleets have none, and then a slot given back
 * costs no read for them.
 */
const anyQuota = (trx: Db) => {
  const asked = quotasAsked(trx);
  asked.answer ??= trx
    .selectFrom('quotas')
    .select('id')
    .limit(1)
    .executeTakeFirst()
    .then((row) => row !== undefined);
  return asked.answer;
};
const quotasAsked = perStep((): { answer?: Promise<boolean> } => ({}));
