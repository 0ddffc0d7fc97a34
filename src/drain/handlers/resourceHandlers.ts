import { sql } from 'kysely';
import type { BlueprintRow, ResourceRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import type { CommandKindOf, PayloadOf } from '../../domain/commandKinds.ts';
import { mismatch, parseSelector, resourceLabels } from '../../domain/labels.ts';
import { accepts, grantsSlots, isSettingUp } from '../../domain/lifecycle.ts';
import { type CheckAnswer, type DriverResult, driverResource, PermanentDriverError, type ResourceCall } from '../../drivers/Driver.ts';
import { retryDelayMs } from '../driverFailure.ts';
import { takeSlot } from '../sql/takeSlot.ts';
import { type FollowUp, send } from '../messages.ts';
import { done, failed, type HandlerContext, type HandlerOf, type HandlerTable, mergedAttributes, type OutcomeEvent, yieldFor } from '../Handler.ts';
import { nothingRemoved, orphanRemoved, recordedOrphan } from './destroyOrphan.ts';
import { blueprintHasWaiters, giveBackSlot, quotaFreed, slotFreed, slotFreedEvent } from './slotsGivenBack.ts';
import { formatDuration } from '../../domain/durations.ts';

type Ctx = HandlerContext<'resource'>;
/** The context of a handler of `C`, its payload typed by that kind's schema. */
type CtxOf<C extends CommandKindOf<'resource'>> = HandlerContext<'resource', PayloadOf<'resource', C>>;

/** How often a queued acquire looks again while its resource is still being made. */
const ACQUIRE_WHILE_PENDING_MS = 1000;

const resourceCall = (ctx: Ctx): ResourceCall => ({ ...ctx.call, resource: driverResource(ctx.object) });

const deny = (resource: ResourceRow, leaseId: number, reason: string): FollowUp =>
  send.lease.deny(leaseId, { resourceId: resource.id, reason }, `resource ${resource.id} refused: ${reason}`);

/**
 * idle_since, kept by the resource's own drain from its count of slots:
 * null while any is taken; otherwise when it first counted none (kept
 * through later counts of none), or now. The collector reclaims by it. The
 * worker's clock, not the database's: an idle time is minutes long, clock
 * skew between hosts is not.
 */
const idleFrom = (resource: ResourceRow, usedSlots: number) => (usedSlots > 0 ? null : (resource.idle_since ?? new Date()));

/**
 * How many of the resource's slots are taken: its slot rows, held or
 * waiting to be cleaned. Counted, not read from `used_slots`: a lease
 * deletes its own slot row when it ends and tells the resource only when
 * it may have emptied it (slotsGivenBack.ts), so the column is the count
 * as the resource last wrote it, at least the truth. The resource writes
 * every count it makes back to the column, which the previous release's
 * workers read (docs/upgrades.md). A row another transaction is deleting
 * still counts here: a count too high by it only refuses or waits, and
 * that return tells the resource if the count it misses was its last.
 */
async function slotsInUse(trx: Db, resourceId: number): Promise<number> {
  const { n } = await trx
    .selectFrom('resource_slots')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('resource_id', '=', resourceId)
    .executeTakeFirstOrThrow();
  return Number(n);
}

/**
 * The resource's slots counted once every return in progress has
 * committed: each row key-share locked, which waits for a lease deleting
 * it (and then skips it). For a resource put back in service: the lease
 * reads the resource's state after its delete and offers the slot only
 * to a resource that grants slots, so without the wait a return during
 * the switch would be offered by neither.
 */
async function slotsInUseSettled(trx: Db, resourceId: number): Promise<number> {
  const rows = await trx.selectFrom('resource_slots').select('slot').where('resource_id', '=', resourceId).forKeyShare().execute();
  return rows.length;
}

/** The acquires queued for the resource: leases its blueprint sent here that have not been answered yet. */
async function acquiresQueued(trx: Db, resourceId: number): Promise<number> {
  const { n } = await trx
    .selectFrom('commands')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('target_kind', '=', 'resource')
    .where('target_id', '=', resourceId)
    .where('kind', '=', 'acquire')
    .where('status', 'in', ['queued', 'running'])
    .executeTakeFirstOrThrow();
  return Number(n);
}

const destroySelf = (resource: ResourceRow, reason: string): FollowUp => send.resource.destroy(resource.id, reason);

/** The leases holding the resource's slots, by id. */
const slotHolders = (trx: Db, resourceId: number) =>
  trx
    .selectFrom('resource_slots')
    .select('lease_id')
    .where('resource_id', '=', resourceId)
    .where('lease_id', 'is not', null)
    .orderBy('lease_id')
    .$narrowType<{ lease_id: number }>()
    .execute();

/**
 * Forgets the slots waiting to be cleaned (rows with no lease) of a resource
 * that is going away: nobody will lease them again, so they are not
 * cleaned, and they must not keep it from being destroyed once its leases
 * have ended. Answers how many there were.
 */
async function dropDirtySlots(trx: Db, resourceId: number): Promise<number> {
  const dropped = await trx.deleteFrom('resource_slots').where('resource_id', '=', resourceId).where('lease_id', 'is', null).executeTakeFirst();
  return Number(dropped.numDeletedRows);
}

/**
 * Whether a lease's slot given back to the resource is freed at once (its
 * row deleted) rather than kept, with no lease, until it is cleaned: on a
 * blueprint that cleans between leases the slot stays taken; a resource
 * going away (released, broken) is not cleaned for nobody.
 */
const freedAtOnce = (resource: ResourceRow, blueprint: BlueprintRow) =>
  !(blueprint.clean_between_leases && accepts('resource', resource.state, 'clean_slot'));

/**
 * Tells the blueprint when this resource, in a state that grants slots (or
 * about to be put back in one) with `usedSlots` taken, has a slot its
 * waiting leases could have. Every path that leaves a slot free
 * must ask: a slot the blueprint counted as promised to a lease (made for it,
 * or sent it) and that the lease no longer takes is free again, and nothing
 * else would ever offer it to the leases waiting for one.
 */
async function offerFreeSlot(trx: Db, resource: ResourceRow, usedSlots: number): Promise<FollowUp[]> {
  if (usedSlots >= resource.capacity) return [];
  return (await blueprintHasWaiters(trx, resource.blueprint_id)) ? [slotFreed(resource.id, resource.blueprint_id)] : [];
}

/** What a cleaning came to: the driver's error is the decision's to weigh (a retry, or quarantine after too many). */
type Cleaning = { readonly ok: true } | { readonly ok: false; readonly error: Error };

/** Has the driver clean one slot (nothing to do for a driver that does not clean). */
async function cleanAtDriver(ctx: Ctx, slot: number): Promise<Cleaning> {
  try {
    await ctx.driver().cleanSlot?.({ ...resourceCall(ctx), slot });
    return { ok: true };
  } catch (error) {
    return { ok: false, error: error as Error };
  }
}

/** Frees slots that were waiting to be cleaned; answers how many were. */
async function freeCleanedSlots(trx: Db, resource: ResourceRow, slots: readonly number[]): Promise<number> {
  if (slots.length === 0) return 0;
  const freed = await trx
    .deleteFrom('resource_slots')
    .where('resource_id', '=', resource.id)
    .where('slot', 'in', slots)
    .where('lease_id', 'is', null)
    .executeTakeFirst();
  return Number(freed.numDeletedRows);
}

/** A check's answer; `unchecked` when the driver has no check (its resources are trusted as made). */
type Health = CheckAnswer | { readonly health: 'unchecked' };

/**
 * Asks the driver about the resource. A check whose program or output is
 * broken (a permanent driver failure) says the resource cannot be vouched
 * for: unhealthy, with that message, rather than the broken resource every
 * other permanent failure makes. A transient failure is retried, as any
 * driver call's.
 */
async function askDriver(ctx: Ctx): Promise<Health> {
  const driver = ctx.driver();
  if (!driver.checkResource) return { health: 'unchecked' };
  try {
    const answer = await driver.checkResource(resourceCall(ctx));
    return { health: answer.health ?? 'healthy', ...(answer.message ? { message: answer.message } : {}) };
  } catch (error) {
    if (error instanceof PermanentDriverError) return { health: 'unhealthy', message: `the check failed: ${error.message}` };
    throw error;
  }
}

/**
 * What a check's answer does to the resource. Its health is recorded on the
 * row, with an event only when the answer differs from the last one, so a
 * resource checked healthy every minute adds nothing but its checked_at.
 * Unhealthy quarantines it (its leases carry on); gone breaks it, tells each
 * lease on it (each is broken with the reason) and destroys it, and the
 * blueprint then counts it out and serves its line from the room that
 * makes. `repairing`: a healthy answer puts a quarantined resource back in
 * service; a plain check leaves that to an operator.
 */
async function decideHealth(trx: Db, ctx: Ctx, answer: Health, repairing: boolean) {
  const resource = ctx.object;
  if (answer.health === 'unchecked') {
    // Nothing to ask: a repair trusts the resource as made, a check has nothing to say.
    if (!repairing) return done<'resource'>('the driver has no check: nothing to ask');
    return backInService(trx, resource, {}, [], 'repaired (the driver has no check), back in service');
  }
  const message = answer.message ?? null;
  const said = `${answer.health}${message ? `: ${message}` : ''}`;
  const changed = resource.health !== answer.health || resource.health_message !== message;
  // The worker's clock, as idle_since: a check interval is minutes, clock skew is not.
  const set = { health: answer.health, health_message: message, checked_at: new Date() };
  const events = changed ? [{ type: 'health', message: said, data: { health: answer.health, message } }] : [];
  if (answer.health === 'gone') {
    const holders = await slotHolders(trx, resource.id);
    return done<'resource'>(`${said}; broken${holders.length ? `, and its ${holders.length} lease(s) with it` : ''}`, {
      to: 'broken',
      set: { ...set, message: said },
      events,
      followUps: [
        ...holders.map((h) =>
          send.lease.resource_gone(
            h.lease_id,
            { resourceId: resource.id, reason: message ?? 'its driver found it gone' },
            `resource ${resource.id} is gone`,
          ),
        ),
        destroySelf(resource, 'gone'),
      ],
    });
  }
  if (answer.health === 'unhealthy') {
    if (resource.state === 'quarantined') return (repairing ? failed<'resource'> : done<'resource'>)(`still ${said}`, { set, events });
    return done<'resource'>(`${said}; quarantined: it takes no new leases`, { to: 'quarantined', set: { ...set, message: said }, events });
  }
  if (resource.state === 'quarantined' && repairing) return backInService(trx, resource, set, events, 'healthy: repaired, back in service');
  return done<'resource'>(resource.state === 'quarantined' ? 'healthy (quarantined until repaired)' : 'healthy', { set, events });
}

/**
 * A resource back in service (uncordoned, or repaired): active again, its
 * message cleared and its free slots offered to the line. Idle from now,
 * not from before: the collector would otherwise reclaim at once a resource
 * an operator just put back.
 */
async function backInService(
  trx: Db,
  resource: ResourceRow,
  set: Partial<Pick<ResourceRow, 'health' | 'health_message' | 'checked_at'>>,
  events: readonly OutcomeEvent[],
  message: string,
) {
  const used = await slotsInUseSettled(trx, resource.id);
  return done<'resource'>(message, {
    to: 'active',
    set: { ...set, message: null, used_slots: used, idle_since: used > 0 ? null : new Date() },
    events,
    followUps: await offerFreeSlot(trx, resource, used),
  });
}

/** A repair's work at the driver: the check, then (unless it found the resource unhealthy or gone) a cleaning of each slot still waiting for one. */
interface Repairing {
  readonly answer: Health;
  readonly cleaned: readonly number[];
  readonly failedCleaning?: { readonly slot: number; readonly message: string };
}

async function repairAtDriver(ctx: Ctx): Promise<Repairing> {
  const answer = await askDriver(ctx);
  if (answer.health === 'unhealthy' || answer.health === 'gone') return { answer, cleaned: [] };
  // The resource's drain holds its lock while its effects run, and only it writes its slots.
  const dirty = await ctx.db
    .selectFrom('resource_slots')
    .select('slot')
    .where('resource_id', '=', ctx.object.id)
    .where('lease_id', 'is', null)
    .orderBy('slot')
    .execute();
  const cleaned: number[] = [];
  for (const { slot } of dirty) {
    const cleaning = await cleanAtDriver(ctx, slot);
    if (!cleaning.ok) return { answer, cleaned, failedCleaning: { slot, message: cleaning.error.message } };
    cleaned.push(slot);
  }
  return { answer, cleaned };
}

const allocate = {
  shape: 'effectful',
  effect: (ctx: Ctx) => ctx.driver().allocateResource(resourceCall(ctx)),
  async decide(_trx: Db, ctx: Ctx, result: DriverResult) {
    return done<'resource'>('allocated', {
      // A driver that knows the resource's slots (a static pool's entry) overrides the blueprint's default.
      set: {
        attributes: mergedAttributes(ctx.object.attributes, result.attributes),
        ...(result.capacity ? { capacity: result.capacity } : {}),
        ...(result.labels ? { labels: JSON.stringify(result.labels) } : {}),
      },
      events: [{ type: 'allocated', message: 'the driver allocated it' }],
      followUps: [send.resource.activate(ctx.object.id, 'allocated')],
    });
  },
} satisfies HandlerOf<'resource', 'allocate'>;

const activate = {
  shape: 'effectful',
  readsInTransaction: true,
  effect: (ctx: Ctx) => ctx.driver().activateResource(resourceCall(ctx)),
  async decide(trx: Db, ctx: Ctx, result: DriverResult) {
    const resource = ctx.object;
    // Acquires that yielded while we were pending can be served now.
    await trx
      .updateTable('commands')
      .set({ not_before: sql<Date>`now()` })
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resource.id)
      .where('kind', '=', 'acquire')
      .where('status', '=', 'queued')
      .execute();
    // Slots beyond the one made for the waiting lease can serve others
    // (the blueprint discounts the slot that lease's acquire will take).
    const used = await slotsInUse(trx, resource.id);
    return done<'resource'>('active', {
      to: 'active',
      set: { attributes: mergedAttributes(resource.attributes, result.attributes), used_slots: used, idle_since: idleFrom(resource, used) },
      followUps: await offerFreeSlot(trx, resource, used),
    });
  },
} satisfies HandlerOf<'resource', 'activate'>;

// Acquires and slot returns come in bursts (a waiting line served, leases
// ending together) and each decides from the slots table and the row in
// memory alone: a run of them is one step (see commandRun.ts).
const acquire = {
  shape: 'querying',
  inRuns: true,
  async decide(trx: Db, ctx: CtxOf<'acquire'>) {
    const resource = ctx.object;
    const { leaseId } = ctx.payload;
    if (isSettingUp('resource', resource.state)) return yieldFor<'resource'>(ACQUIRE_WHILE_PENDING_MS, 'waiting for the resource to become active');
    if (!grantsSlots('resource', resource.state))
      return done<'resource'>(`refused lease ${leaseId}: resource is ${resource.state}`, {
        // A slot the blueprint promised this lease is not there: the lease asks again.
        followUps: [deny(resource, leaseId, `resource is ${resource.state}`)],
      });

    let { lease, heldOn, slot, taken } = await takeSlot(trx, resource, leaseId);
    if (slot === undefined && lease?.selector && lease.state === 'pending' && lease.resourceId === null && heldOn === undefined) {
      // A slot goes only to a lease whose selector this resource's labels match.
      const labels = resourceLabels(resource.labels, ctx.blueprint.labels);
      const failed = mismatch(parseSelector(lease.selector), labels);
      if (failed) {
        return done<'resource'>(`refused lease ${leaseId}: its selector does not match (${failed})`, {
          // Made for that lease (a static pool had no matching entry free), it is not its
          // resource any more: the lease asks its blueprint again rather than being sent back here.
          ...(resource.allocated_for_lease_id === leaseId ? { set: { allocated_for_lease_id: null } } : {}),
          followUps: [deny(resource, leaseId, `its selector does not match this resource's labels (${failed})`)],
        });
      }
      ({ lease, heldOn, slot, taken } = await takeSlot(trx, resource, leaseId, true));
    }
    if (lease?.state !== 'pending' || lease.resourceId !== null) {
      return done<'resource'>(`lease ${leaseId} no longer needs a slot`, { followUps: await offerFreeSlot(trx, resource, taken) });
    }
    if (heldOn !== undefined) {
      return done<'resource'>(`lease ${leaseId} already holds a slot on resource ${heldOn}`, {
        followUps: await offerFreeSlot(trx, resource, taken),
      });
    }
    if (slot === undefined) {
      return done<'resource'>(`refused lease ${leaseId}: all ${resource.capacity} slots taken`, {
        followUps: [deny(resource, leaseId, 'no free slot')],
      });
    }
    return done<'resource'>(`granted slot ${slot} to lease ${leaseId}`, {
      set: { used_slots: taken + 1, idle_since: null },
      events: [{ type: 'slot_granted', message: `slot ${slot} to lease ${leaseId}`, data: { leaseId, slot } }],
      followUps: [
        send.lease.grant(
          leaseId,
          { resourceId: resource.id, slot },
          // Why the blueprint chose this lease rides along, so the lease's timeline says it.
          `resource ${resource.id} has a slot${ctx.command.reason ? ` — ${ctx.command.reason}` : ''}`,
        ),
      ],
    });
  },
} satisfies HandlerOf<'resource', 'acquire'>;

// A slot taken back from a lease: on a blueprint that cleans between
// leases (its lease asks, rather than freeing the slot itself), and for
// a lease that a grant reached after it no longer wanted a slot.
const releaseSlot = {
  shape: 'querying',
  inRuns: true,
  async decide(trx: Db, ctx: CtxOf<'release_slot'>) {
    const resource = ctx.object;
    const { leaseId } = ctx.payload;
    if (!freedAtOnce(resource, ctx.blueprint)) {
      const dirty = await trx
        .updateTable('resource_slots')
        .set({ lease_id: null })
        .where('resource_id', '=', resource.id)
        .where('lease_id', '=', leaseId)
        .returning('slot')
        .executeTakeFirst();
      if (!dirty) return done<'resource'>(`lease ${leaseId} held no slot here`);
      return done<'resource'>(`lease ${leaseId} gave back slot ${dirty.slot}; cleaning it`, {
        events: [slotFreedEvent(resource.id, leaseId, dirty.slot, ', to be cleaned')],
        followUps: [
          send.resource.clean_slot(resource.id, { slot: dirty.slot }, `lease ${leaseId} gave it back`),
          ...(await quotaFreed(trx, leaseId)),
        ],
      });
    }
    const given = await giveBackSlot(trx, { resourceId: resource.id, leaseId, blueprintId: resource.blueprint_id });
    if (!given) return done<'resource'>(`lease ${leaseId} held no slot here`);
    const used = given.left.slots;
    const followUps: FollowUp[] = [];
    if (resource.state === 'released' && used === 0) followUps.push(destroySelf(resource, 'released and empty'));
    if (grantsSlots('resource', resource.state)) followUps.push(...(await offerFreeSlot(trx, resource, used)));
    followUps.push(...(await quotaFreed(trx, leaseId)));
    return done<'resource'>(`lease ${leaseId} gave back slot ${given.slot}`, {
      set: { used_slots: used, idle_since: idleFrom(resource, used) },
      events: [slotFreedEvent(resource.id, leaseId, given.slot)],
      followUps,
    });
  },
} satisfies HandlerOf<'resource', 'release_slot'>;

// A lease gave back what may have been the resource's last slot
// (slotsGivenBack.ts): the resource counts its slots, idle from now if
// none is taken, and destroyed if it was released and is empty.
const countSlots = {
  shape: 'querying',
  async decide(trx: Db, ctx: Ctx) {
    const resource = ctx.object;
    const used = await slotsInUse(trx, resource.id);
    const destroyed = resource.state === 'released' && used === 0;
    // A lease its blueprint sent here may be on its way (its acquire queued behind this count): "no slot taken" alone would read as if none were coming.
    const coming = used === 0 && !destroyed ? await acquiresQueued(trx, resource.id) : 0;
    return done<'resource'>(
      used === 0
        ? `no slot taken${destroyed ? ': released and empty' : coming > 0 ? ` yet: ${coming} lease(s) on the way to take one` : ''}`
        : `${used} of ${resource.capacity} slot(s) taken`,
      {
        set: { used_slots: used, idle_since: idleFrom(resource, used) },
        followUps: destroyed ? [destroySelf(resource, 'released and empty')] : [],
      },
    );
  },
} satisfies HandlerOf<'resource', 'count_slots'>;

const release = {
  shape: 'querying',
  async decide(trx: Db, ctx: Ctx) {
    const resource = ctx.object;
    if (resource.state === 'broken')
      return done<'resource'>('broken: destroying it again', { followUps: [destroySelf(resource, 'release of a broken resource')] });
    const holders = await slotHolders(trx, resource.id);
    await dropDirtySlots(trx, resource.id);
    const followUps: FollowUp[] =
      holders.length === 0
        ? [destroySelf(resource, 'released with no leases')]
        : holders.map((h) => send.lease.release(h.lease_id, {}, `resource ${resource.id} is being released`));
    return done<'resource'>(holders.length === 0 ? 'released' : `released; releasing its ${holders.length} lease(s) first`, {
      to: 'released',
      set: { used_slots: holders.length },
      followUps,
    });
  },
} satisfies HandlerOf<'resource', 'release'>;

const reclaim = {
  shape: 'querying',
  async decide(trx: Db, ctx: Ctx) {
    const resource = ctx.object;
    const held = (await slotHolders(trx, resource.id)).length;
    if (held > 0) return failed<'resource'>(`not reclaimed: ${held} lease(s) hold it`);
    await dropDirtySlots(trx, resource.id);
    return done<'resource'>('reclaimed', {
      to: 'released',
      set: { used_slots: 0 },
      followUps: [destroySelf(resource, 'reclaimed')],
    });
  },
} satisfies HandlerOf<'resource', 'reclaim'>;

// Released without releasing its leases: acquires are refused from now
// on, and it is destroyed once its last lease has given its slot back
// (the count that return asks for, count_slots).
const retire = {
  shape: 'querying',
  async decide(trx: Db, ctx: Ctx) {
    const resource = ctx.object;
    await dropDirtySlots(trx, resource.id);
    const used = await slotsInUse(trx, resource.id);
    const empty = used === 0;
    return done<'resource'>(empty ? 'retired with no leases' : `retired; destroyed once its ${used} lease(s) end`, {
      to: 'released',
      set: { used_slots: used },
      followUps: empty ? [destroySelf(resource, 'retired with no leases')] : [],
    });
  },
} satisfies HandlerOf<'resource', 'retire'>;

// A slot a lease gave back, cleaned by the driver before it may be
// granted again. A failed cleaning is retried with backoff; the
// blueprint's clean_attempts-th failure in a row (or a permanent one)
// quarantines the resource, the slot still waiting: an operator's repair
// cleans it again.
const cleanSlot = {
  shape: 'effectful',
  readsInTransaction: true,
  effect: (ctx: CtxOf<'clean_slot'>) => cleanAtDriver(ctx, ctx.payload.slot),
  async decide(trx: Db, ctx: CtxOf<'clean_slot'>, cleaning: Cleaning) {
    const resource = ctx.object;
    const { slot } = ctx.payload;
    if (cleaning.ok) {
      if ((await freeCleanedSlots(trx, resource, [slot])) === 0) return done<'resource'>(`slot ${slot} was not waiting to be cleaned`);
      const used = await slotsInUse(trx, resource.id);
      return done<'resource'>(`cleaned slot ${slot}`, {
        set: { used_slots: used, idle_since: idleFrom(resource, used) },
        events: [{ type: 'slot_cleaned', message: `slot ${slot}`, data: { slot } }],
        followUps: grantsSlots('resource', resource.state) ? await offerFreeSlot(trx, resource, used) : [],
      });
    }
    const { error } = cleaning;
    const attempt = ctx.command.attempts + 1;
    const permanent = error instanceof PermanentDriverError;
    if (permanent || attempt >= ctx.blueprint.clean_attempts) {
      const message = `cleaning slot ${slot} failed${permanent ? ' for good' : ` ${attempt} time(s)`}: ${error.message}`;
      return failed<'resource'>(resource.state === 'quarantined' ? message : `${message}; quarantined`, {
        ...(resource.state === 'quarantined' ? {} : { to: 'quarantined' }),
        set: { message },
        events: [{ type: 'cleaning_failed', message, data: { slot, attempt } }],
      });
    }
    const retryInMs = retryDelayMs(error, ctx.command.attempts);
    return {
      status: 'yield',
      message: `cleaning slot ${slot} failed (attempt ${attempt} of ${ctx.blueprint.clean_attempts}), retrying in ${formatDuration(retryInMs)}: ${error.message}`,
      retryInMs,
      events: [{ type: 'driver_error', message: error.message, data: { slot, attempt, retryInMs } }],
    };
  },
} satisfies HandlerOf<'resource', 'clean_slot'>;

// Into maintenance: from here on acquire refuses every lease (each asks its
// blueprint again, which counts only active resources' slots), while the
// leases that hold slots carry on and give them back as usual.
const cordon = {
  shape: 'querying',
  async decide(trx: Db, ctx: Ctx) {
    const used = await slotsInUse(trx, ctx.object.id);
    return done<'resource'>(`in maintenance: takes no new leases${used > 0 ? `; its ${used} lease(s) carry on` : ''}`, { to: 'maintenance' });
  },
} satisfies HandlerOf<'resource', 'cordon'>;

const uncordon = {
  shape: 'querying',
  decide: (trx: Db, ctx: Ctx) => backInService(trx, ctx.object, {}, [], 'back in service'),
} satisfies HandlerOf<'resource', 'uncordon'>;

const check = {
  shape: 'effectful',
  readsInTransaction: true,
  effect: askDriver,
  decide: (trx: Db, ctx: Ctx, answer: Health) => decideHealth(trx, ctx, answer, false),
} satisfies HandlerOf<'resource', 'check'>;

// Checks the resource again and cleans the slots still waiting for it:
// healthy and clean, it takes leases again.
const repair = {
  shape: 'effectful',
  readsInTransaction: true,
  effect: repairAtDriver,
  async decide(trx: Db, ctx: Ctx, { answer, cleaned, failedCleaning }: Repairing) {
    await freeCleanedSlots(trx, ctx.object, cleaned);
    if (failedCleaning) {
      return failed<'resource'>(`still quarantined: cleaning slot ${failedCleaning.slot} failed: ${failedCleaning.message}`, {
        set: { used_slots: await slotsInUse(trx, ctx.object.id) },
      });
    }
    const outcome = await decideHealth(trx, ctx, answer, true);
    const cleanedEvents = cleaned.map((slot) => ({ type: 'slot_cleaned', message: `slot ${slot}`, data: { slot } }));
    return { ...outcome, events: [...cleanedEvents, ...(outcome.events ?? [])] };
  },
} satisfies HandlerOf<'resource', 'repair'>;

/** What freeing an orphaned slot came to: the slot freed, or why the driver was not asked. */
type SlotRemoval = { readonly freed: { readonly id: string; readonly slot: number } } | { readonly skipped: string; readonly fails?: true };

/**
 * Frees an orphaned slot (src/gc/findOrphans.ts records them): one the
 * collector's last pass still records on this resource, and that no lease
 * holds now. The resource's drain holds its lock while this runs and is the
 * only writer of its slots, so a slot with no row here is granted to no
 * lease until the driver has freed it; a slot granted since the pass is
 * left alone. The driver frees it as it cleans a slot (`cleanSlot`).
 */
async function freeOrphanedSlot(ctx: CtxOf<'destroy_orphan'>): Promise<SlotRemoval> {
  const { orphan } = ctx.payload;
  const recorded = await recordedOrphan(ctx.db, ctx.object.blueprint_id, orphan);
  if (recorded?.slot == null || Number(recorded.resource_id) !== ctx.object.id) {
    return { skipped: `"${orphan}" is not an orphaned slot of this resource the collector records (no longer listed, or held by a lease)` };
  }
  const { slot } = recorded;
  const held = await ctx.db
    .selectFrom('resource_slots')
    .select('lease_id')
    .where('resource_id', '=', ctx.object.id)
    .where('slot', '=', slot)
    .executeTakeFirst();
  if (held) return { skipped: `slot ${slot} is taken again (${held.lease_id === null ? 'waiting to be cleaned' : `by lease ${held.lease_id}`})` };
  const driver = ctx.driver();
  if (!driver.cleanSlot)
    return { skipped: `the ${ctx.blueprint.driver} driver of this blueprint cannot free a slot (it has no cleanSlot)`, fails: true };
  await driver.cleanSlot({ ...resourceCall(ctx), slot });
  return { freed: { id: orphan, slot } };
}

const destroyOrphanedSlot = {
  shape: 'effectful',
  readsInTransaction: true,
  effect: freeOrphanedSlot,
  async decide(trx: Db, ctx: CtxOf<'destroy_orphan'>, removal: SlotRemoval) {
    if ('skipped' in removal) return nothingRemoved<'resource'>(removal.skipped, removal.fails);
    const { id, slot } = removal.freed;
    const event = await orphanRemoved(trx, ctx.object.blueprint_id, id, `orphaned slot ${slot} ("${id}") freed by the driver`, removal.freed);
    return done<'resource'>(`orphaned slot ${slot} ("${id}") freed`, { events: [event] });
  },
} satisfies HandlerOf<'resource', 'destroy_orphan'>;

const destroy = {
  shape: 'effectful',
  effect: (ctx: Ctx) => ctx.driver().destroyResource(resourceCall(ctx)),
  async decide(_trx: Db, ctx: Ctx) {
    const resource = ctx.object;
    return done<'resource'>('destroyed', {
      to: 'destroyed',
      followUps: [send.blueprint.resource_destroyed(resource.blueprint_id, { resourceId: resource.id }, `resource ${resource.id} destroyed`)],
    });
  },
} satisfies HandlerOf<'resource', 'destroy'>;

/**
 * A resource is the single writer of its slots: it alone decides who gets
 * one, so capacity holds without any slot locks.
 */
export const RESOURCE_HANDLERS = {
  allocate,
  activate,
  acquire,
  release_slot: releaseSlot,
  count_slots: countSlots,
  release,
  reclaim,
  retire,
  clean_slot: cleanSlot,
  cordon,
  uncordon,
  // The old names, as processes of the release before still append them (decision 0036).
  drain: cordon,
  undrain: uncordon,
  check,
  repair,
  destroy_orphan: destroyOrphanedSlot,
  destroy,
} satisfies HandlerTable<'resource'>;
