import { sql } from 'kysely';
import type { ResourceRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import type { CommandKindOf, PayloadOf } from '../../domain/commandKinds.ts';
import { type CheckAnswer, type DriverResult, PermanentDriverError, type ResourceCall } from '../../drivers/Driver.ts';
import { hasWaitingLeases } from '../sql/freeSlot.ts';
import { takeSlot } from '../sql/takeSlot.ts';
import { done, failed, type FollowUp, type HandlerContext, type HandlerTable, mergedAttributes, yieldFor } from '../Handler.ts';
import { perStep } from '../perStep.ts';

type Ctx = HandlerContext<'resource'>;
/** The context of a handler of `C`, its payload typed by that kind's schema. */
type CtxOf<C extends CommandKindOf<'resource'>> = HandlerContext<'resource', PayloadOf<'resource', C>>;
const self = (resource: ResourceRow) => ({ kind: 'resource', id: resource.id }) as const;

/** How often a queued acquire looks again while its resource is still being made. */
const ACQUIRE_WHILE_PENDING_MS = 1000;

const resourceCall = (ctx: Ctx): ResourceCall => ({
  ...ctx.call,
  resource: {
    id: ctx.object.id,
    capacity: ctx.object.capacity,
    attributes: ctx.object.attributes as Record<string, unknown>,
  },
});

const deny = (resource: ResourceRow, leaseId: number, reason: string): FollowUp => ({
  target: { kind: 'lease', id: leaseId },
  kind: 'deny',
  payload: { resourceId: resource.id, reason },
  reason: `resource ${resource.id} refused: ${reason}`,
});

/**
 * idle_since, kept by the resource's own drain: when its last slot was
 * given back (or it became active), null while a lease holds a slot. The
 * collector reclaims by it. The worker's clock, not the database's: an idle
 * time is minutes long, clock skew between hosts is not.
 */
const idleFrom = (usedSlots: number) => (usedSlots > 0 ? null : new Date());

const destroySelf = (resource: ResourceRow, reason: string): FollowUp => ({ target: self(resource), kind: 'destroy', reason });

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
function blueprintHasWaiters(trx: Db, blueprintId: number): Promise<boolean> {
  // Asked once per blueprint and step: from the row lock on, no lease can
  // join the line until this transaction ends (joining takes the
  // blueprint's row FOR NO KEY UPDATE), so every later decision of the step
  // (the rest of a run of slot returns) would read the same answer, at two
  // round trips each. A waiter that leaves meanwhile costs at most a
  // slot_freed that finds nobody.
  const asked = waitersAsked(trx);
  let answer = asked.get(blueprintId);
  if (!answer) {
    answer = trx
      .selectFrom('blueprints')
      .select('id')
      .where('id', '=', blueprintId)
      .forShare()
      .execute()
      .then(() => hasWaitingLeases(trx, blueprintId));
    asked.set(blueprintId, answer);
  }
  return answer;
}
const waitersAsked = perStep(() => new Map<number, Promise<boolean>>());

const slotFreed = (resource: ResourceRow): FollowUp => ({
  target: { kind: 'blueprint', id: resource.blueprint_id },
  kind: 'slot_freed',
  payload: { resourceId: resource.id },
  reason: `resource ${resource.id} has a free slot`,
});

/**
 * Tells the blueprint when this resource, active with `usedSlots` taken, has
 * a slot its waiting leases could have. Every path that leaves a slot free
 * must ask: a slot the blueprint counted as promised to a lease (made for it,
 * or sent it) and that the lease no longer takes is free again, and nothing
 * else would ever offer it to the leases waiting for one.
 */
async function offerFreeSlot(trx: Db, resource: ResourceRow, usedSlots: number): Promise<FollowUp[]> {
  if (usedSlots >= resource.capacity) return [];
  return (await blueprintHasWaiters(trx, resource.blueprint_id)) ? [slotFreed(resource)] : [];
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
  if (answer.health === 'unchecked') return done<'resource'>('the driver has no check: nothing to ask');
  const message = answer.message ?? null;
  const said = `${answer.health}${message ? `: ${message}` : ''}`;
  const changed = resource.health !== answer.health || resource.health_message !== message;
  // The worker's clock, as idle_since: a check interval is minutes, clock skew is not.
  const set = { health: answer.health, health_message: message, checked_at: new Date() };
  const events = changed ? [{ type: 'health', message: said, data: { health: answer.health, message } }] : [];
  if (answer.health === 'gone') {
    const holders = await trx.selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resource.id).orderBy('lease_id').execute();
    return done<'resource'>(`${said}; broken${holders.length ? `, and its ${holders.length} lease(s) with it` : ''}`, {
      to: 'broken',
      set: { ...set, message: said },
      events,
      followUps: [
        ...holders.map(
          (h): FollowUp => ({
            target: { kind: 'lease', id: h.lease_id },
            kind: 'resource_gone',
            payload: { resourceId: resource.id, reason: said },
            reason: `resource ${resource.id} is gone`,
          }),
        ),
        destroySelf(resource, 'gone'),
      ],
    });
  }
  if (answer.health === 'unhealthy') {
    if (resource.state === 'quarantined') return (repairing ? failed<'resource'> : done<'resource'>)(`still ${said}`, { set, events });
    return done<'resource'>(`${said}; quarantined: it takes no new leases`, { to: 'quarantined', set: { ...set, message: said }, events });
  }
  if (resource.state === 'quarantined' && repairing) {
    return done<'resource'>('healthy: repaired, back in service', {
      to: 'active',
      set: { ...set, message: null, idle_since: idleFrom(resource.used_slots) },
      events,
      followUps: await offerFreeSlot(trx, resource, resource.used_slots),
    });
  }
  return done<'resource'>(resource.state === 'quarantined' ? 'healthy (quarantined until repaired)' : 'healthy', { set, events });
}

/**
 * A resource is the single writer of its slots: it alone decides who gets
 * one, so capacity holds without any slot locks.
 */
export const RESOURCE_HANDLERS = {
  allocate: {
    effect: (ctx: Ctx) => ctx.driver().allocateResource(resourceCall(ctx)),
    async decide(_trx: Db, ctx: Ctx, result: DriverResult) {
      return done<'resource'>('allocated', {
        // A driver that knows the resource's slots (a static pool's entry) overrides the blueprint's default.
        set: { attributes: mergedAttributes(ctx.object.attributes, result.attributes), ...(result.capacity ? { capacity: result.capacity } : {}) },
        events: [{ type: 'allocated', message: 'the driver allocated it' }],
        followUps: [{ target: self(ctx.object), kind: 'activate', reason: 'allocated' }],
      });
    },
  },

  activate: {
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
      return done<'resource'>('active', {
        to: 'active',
        set: { attributes: mergedAttributes(resource.attributes, result.attributes), idle_since: idleFrom(resource.used_slots) },
        followUps: await offerFreeSlot(trx, resource, resource.used_slots),
      });
    },
  },

  // Acquires and slot returns come in bursts (a waiting line served, leases
  // ending together) and each decides from the slots table and the row in
  // memory alone: a run of them is one step (see commandRun.ts).
  acquire: {
    readsInTransaction: true,
    inRuns: true,
    async decide(trx: Db, ctx: CtxOf<'acquire'>) {
      const resource = ctx.object;
      const { leaseId } = ctx.payload;
      if (resource.state === 'pending') return yieldFor<'resource'>(ACQUIRE_WHILE_PENDING_MS, 'waiting for the resource to become active');
      if (resource.state !== 'active')
        return done<'resource'>(`refused lease ${leaseId}: resource is ${resource.state}`, {
          // A slot the blueprint promised this lease is not there: the lease asks again.
          followUps: [deny(resource, leaseId, `resource is ${resource.state}`)],
        });

      const { lease, heldOn, slot } = await takeSlot(trx, resource, leaseId);
      if (lease?.state !== 'pending' || lease.resourceId !== null) {
        return done<'resource'>(`lease ${leaseId} no longer needs a slot`, { followUps: await offerFreeSlot(trx, resource, resource.used_slots) });
      }
      if (heldOn !== undefined) {
        return done<'resource'>(`lease ${leaseId} already holds a slot on resource ${heldOn}`, {
          followUps: await offerFreeSlot(trx, resource, resource.used_slots),
        });
      }
      if (slot === undefined) {
        return done<'resource'>(`refused lease ${leaseId}: all ${resource.capacity} slots taken`, {
          followUps: [deny(resource, leaseId, 'no free slot')],
        });
      }
      return done<'resource'>(`granted slot ${slot} to lease ${leaseId}`, {
        set: { used_slots: resource.used_slots + 1, idle_since: null },
        events: [{ type: 'slot_granted', message: `slot ${slot} to lease ${leaseId}`, data: { leaseId, slot } }],
        followUps: [
          {
            target: { kind: 'lease', id: leaseId },
            kind: 'grant',
            payload: { resourceId: resource.id, slot },
            reason: `resource ${resource.id} has a slot`,
          },
        ],
      });
    },
  },

  release_slot: {
    readsInTransaction: true,
    inRuns: true,
    async decide(trx: Db, ctx: CtxOf<'release_slot'>) {
      const resource = ctx.object;
      const { leaseId } = ctx.payload;
      const freed = await trx
        .deleteFrom('resource_slots')
        .where('resource_id', '=', resource.id)
        .where('lease_id', '=', leaseId)
        .returning('slot')
        .executeTakeFirst();
      if (!freed) return done<'resource'>(`lease ${leaseId} held no slot here`);
      const used = resource.used_slots - 1;
      const followUps: FollowUp[] = [];
      if (resource.state === 'released' && used === 0) followUps.push(destroySelf(resource, 'released and empty'));
      if (resource.state === 'active') followUps.push(...(await offerFreeSlot(trx, resource, used)));
      return done<'resource'>(`lease ${leaseId} gave back slot ${freed.slot}`, {
        set: { used_slots: used, idle_since: idleFrom(used) },
        events: [{ type: 'slot_freed', message: `slot ${freed.slot} from lease ${leaseId}`, data: { leaseId, slot: freed.slot } }],
        followUps,
      });
    },
  },

  release: {
    readsInTransaction: true,
    async decide(trx: Db, ctx: Ctx) {
      const resource = ctx.object;
      if (resource.state === 'broken')
        return done<'resource'>('broken: destroying it again', { followUps: [destroySelf(resource, 'release of a broken resource')] });
      const holders = await trx.selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resource.id).orderBy('lease_id').execute();
      const followUps: FollowUp[] =
        holders.length === 0
          ? [destroySelf(resource, 'released with no leases')]
          : holders.map((h) => ({
              target: { kind: 'lease', id: h.lease_id } as const,
              kind: 'release',
              reason: `resource ${resource.id} is being released`,
            }));
      return done<'resource'>(holders.length === 0 ? 'released' : `released; releasing its ${holders.length} lease(s) first`, {
        to: 'released',
        followUps,
      });
    },
  },

  reclaim: {
    async decide(_trx: Db, ctx: Ctx) {
      const resource = ctx.object;
      if (resource.used_slots > 0) return failed<'resource'>(`not reclaimed: ${resource.used_slots} lease(s) hold it`);
      return done<'resource'>('reclaimed', { to: 'released', followUps: [destroySelf(resource, 'reclaimed')] });
    },
  },

  // Released without releasing its leases: acquires are refused from now
  // on, and release_slot destroys it once the last lease has given its slot back.
  retire: {
    async decide(_trx: Db, ctx: Ctx) {
      const resource = ctx.object;
      const empty = resource.used_slots === 0;
      return done<'resource'>(empty ? 'retired with no leases' : `retired; destroyed once its ${resource.used_slots} lease(s) end`, {
        to: 'released',
        followUps: empty ? [destroySelf(resource, 'retired with no leases')] : [],
      });
    },
  },

  // Maintenance: from here on acquire refuses every lease (each asks its
  // blueprint again, which counts only active resources' slots), while the
  // leases that hold slots carry on and give them back as usual.
  drain: {
    async decide(_trx: Db, ctx: Ctx) {
      const used = ctx.object.used_slots;
      return done<'resource'>(`in maintenance: takes no new leases${used > 0 ? `; its ${used} lease(s) carry on` : ''}`, { to: 'maintenance' });
    },
  },

  undrain: {
    readsInTransaction: true,
    async decide(trx: Db, ctx: Ctx) {
      const resource = ctx.object;
      // Idle from now, not from before the maintenance: the collector would
      // otherwise reclaim at once a resource an operator just put back.
      return done<'resource'>('back in service', {
        to: 'active',
        set: { idle_since: idleFrom(resource.used_slots) },
        followUps: await offerFreeSlot(trx, resource, resource.used_slots),
      });
    },
  },

  check: {
    readsInTransaction: true,
    effect: askDriver,
    decide: (trx: Db, ctx: Ctx, answer: Health) => decideHealth(trx, ctx, answer, false),
  },

  repair: {
    readsInTransaction: true,
    effect: askDriver,
    decide: (trx: Db, ctx: Ctx, answer: Health) => decideHealth(trx, ctx, answer, true),
  },

  destroy: {
    effect: (ctx: Ctx) => ctx.driver().destroyResource(resourceCall(ctx)),
    async decide(_trx: Db, ctx: Ctx) {
      const resource = ctx.object;
      return done<'resource'>('destroyed', {
        to: 'destroyed',
        followUps: [
          {
            target: { kind: 'blueprint', id: resource.blueprint_id },
            kind: 'resource_destroyed',
            payload: { resourceId: resource.id },
            reason: `resource ${resource.id} destroyed`,
          },
        ],
      });
    },
  },
} satisfies HandlerTable<'resource'>;
