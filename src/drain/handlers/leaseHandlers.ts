import { sql } from 'kysely';
import type { LeaseRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import type { CommandKindOf, PayloadOf } from '../../domain/commandKinds.ts';
import type { DriverResult, LeaseCall } from '../../drivers/Driver.ts';
import { holdsSlot } from '../../domain/lifecycle.ts';
import { deadlinesFromNow, pastDeadline } from '../../objects/leaseDeadlines.ts';
import { done, failed, type HandlerContext, type HandlerOf, type HandlerTable, mergedAttributes, type Outcome, yieldFor } from '../Handler.ts';
import { driverFailure } from '../driverFailure.ts';
import { type FollowUp, send } from '../messages.ts';
import { heldSlot } from '../batchReads/heldSlots.ts';
import { type ResourceIdentity, resourceAttributes } from '../batchReads/resourceAttributes.ts';
import { giveBackSlot, type SlotReturn, slotFreedEvent, slotReturnsBatch, tellOfSlotGivenBack } from './slotsGivenBack.ts';
import { formatTime } from '../../domain/times.ts';
import { describeTimeLimit, endingOf, holdEndOf } from '../../domain/ending.ts';
import { isPreempting } from '../../db/preemptions.ts';

type Ctx<R = unknown> = HandlerContext<'lease', unknown, R>;
/** The context of a handler of `C`, its payload typed by that kind's schema. */
type CtxOf<C extends CommandKindOf<'lease'>, R = unknown> = HandlerContext<'lease', PayloadOf<'lease', C>, R>;

/** How long a lease waits before asking again after a resource refused it. */
const RETRY_AFTER_DENY_MS = 200;

/** The lease's call to the driver about `slot` of the resource its handler's read found. */
function leaseCall(ctx: Ctx<ResourceIdentity>, slot: number): LeaseCall {
  const resource = ctx.read;
  if (!resource) throw new Error(`lease ${ctx.object.id}: its resource is gone`);
  return {
    ...ctx.call,
    lease: { id: ctx.object.id, holder: ctx.object.holder, attributes: ctx.object.attributes as Record<string, unknown> },
    resource,
    slot,
  };
}

/** What a grant's driver calls did: the slot acquired, then the lease activated or why not. */
type Granted = { acquired: DriverResult } & ({ activated: DriverResult } | { activationFailed: Error });

/** The resource a grant names. */
const grantedResource = resourceAttributes((ctx: CtxOf<'grant'>) => ctx.payload.resourceId);
/** The resource the lease holds a slot of, if any. */
const heldResource = resourceAttributes((ctx: Ctx) => ctx.object.resource_id ?? undefined);

/** Asks the resource that granted a slot to take it back (see endHold). */
const releaseSlot = (lease: LeaseRow, resourceId: number, reason: string): FollowUp =>
  send.resource.release_slot(resourceId, { leaseId: lease.id }, reason);

/**
 * The slot on `resourceId` that a lease ending in this command gives back
 * itself (slotsGivenBack.ts); undefined on a blueprint that cleans between
 * leases, where the resource takes it back to clean it first.
 */
function ownReturn(ctx: Ctx, resourceId: number | undefined): SlotReturn | undefined {
  if (resourceId === undefined || ctx.blueprint.clean_between_leases) return undefined;
  return { resourceId, leaseId: ctx.object.id, blueprintId: ctx.object.blueprint_id };
}

/** The resource whose slot a release gives back: the one the lease's row records, if its state holds a slot. */
const slotResource = (ctx: Ctx) => (holdsSlot('lease', ctx.object.state) && ctx.object.resource_id !== null ? ctx.object.resource_id : undefined);

/**
 * A lease's hold on a slot ended by this command: the slot given back (a
 * decision that reads in its transaction), with the event on the
 * resource's timeline and what the return must tell, or, on a blueprint
 * that cleans between leases, the resource asked to take it back.
 */
async function endHold(trx: Db, ctx: Ctx, resourceId: number, why: string): Promise<Pick<Outcome<'lease'>, 'events' | 'followUps'>> {
  const lease = ctx.object;
  const own = ownReturn(ctx, resourceId);
  if (!own) return { followUps: [releaseSlot(lease, resourceId, `lease ${lease.id} ${why}`)] };
  const given = await giveBackSlot(trx, own);
  if (!given) return {};
  return { events: [slotFreedEvent(resourceId, lease.id, given.slot)], followUps: await tellOfSlotGivenBack(trx, lease.id, given) };
}

/**
 * The step's slot returns of plain releases, one batch for them all. An
 * expiry release is left out: it may be skipped, and gives its slot back
 * alone if it is not.
 */
const releaseReturns = slotReturnsBatch((ctx: CtxOf<'release'>) => (ctx.payload.ifExpired ? undefined : ownReturn(ctx, slotResource(ctx))));
/** The step's slot returns of broken leases' destroys. */
const destroyReturns = slotReturnsBatch((ctx: Ctx<number>) => ownReturn(ctx, ctx.read));

/**
 * Whether a release should go ahead. The collector's expiry release
 * (`ifExpired`) is conditional: when it is applied, the lease must still be
 * past a deadline. A renewal queued before it (renew and release both
 * preempt, so they run in the order they were queued) moves the deadline,
 * and a grant applied before it ends the wait a wait deadline counts, and
 * the release settles as a no-op. Anyone's plain release that coalesced
 * into it makes it unconditional again.
 */
async function releaseWanted(db: Db, ctx: CtxOf<'release'>): Promise<boolean> {
  if (!ctx.payload.ifExpired) return true;
  if (await pastDeadline(db, ctx.object)) return true;
  const joined = await db
    .selectFrom('commands')
    .select('id')
    .where('coalesced_into', '=', ctx.command.id)
    .where(sql<boolean>`payload->>'ifExpired' is null`)
    .limit(1)
    .executeTakeFirst();
  return joined !== undefined;
}

/**
 * Tells the lease's holder, through its callback if it gave one, that
 * Slipway ended the lease itself (a check found its resource gone, or the
 * collector released it for a deadline): the callback rides on `commandId`,
 * delivered as any command's once it and all it caused have settled (the
 * deferred trigger of migration 0005 queues it at that commit).
 */
async function tellHolder(trx: Db, lease: LeaseRow, commandId: number): Promise<void> {
  if (!lease.callback_url) return;
  await trx
    .insertInto('command_callbacks')
    .values({ command_id: commandId, url: lease.callback_url })
    .onConflict((oc) => oc.columns(['command_id', 'url']).doNothing())
    .execute();
}

/** The lease's current slot as a driver call. */
const heldCall = (ctx: Ctx<ResourceIdentity>) => leaseCall(ctx, ctx.object.slot!);

const allocate = {
  shape: 'pure',
  // Asking again after a refusal (deny) goes through the lease's own queue,
  // so that a release queued meanwhile supersedes it; a new lease asks its
  // blueprint in the statement that creates it (createLease.ts).
  //
  // The blueprint, single writer of its waiting line and of the slots it
  // promises, sends the lease to a resource with room (or makes one). A
  // lease that picked a free-looking slot itself would race every other
  // lease that saw the same slot, and the losers would be refused and ask
  // again.
  decide(ctx: Ctx) {
    const lease = ctx.object;
    return done<'lease'>('asked the blueprint for a slot', {
      followUps: [send.blueprint.need_resource(lease.blueprint_id, { leaseId: lease.id }, `lease ${lease.id} wants a slot`)],
    });
  },
} satisfies HandlerOf<'lease', 'allocate'>;

const grant = {
  shape: 'effectful',
  read: grantedResource,
  // The heartbeat deadline of a lease it activates is counted on the database's clock.
  readsInTransaction: (ctx) => ctx.object.heartbeat_ms !== null,
  async effect(ctx: CtxOf<'grant', ResourceIdentity>): Promise<Granted | undefined> {
    const lease = ctx.object;
    if (lease.state !== 'pending' || lease.resource_id !== null) return undefined;
    const call = leaseCall(ctx, ctx.payload.slot);
    // A failed acquisition fails the grant as any driver call does (the lane's driverFailure).
    const acquired = await ctx.driver().acquireLease(call);
    try {
      const activated = await ctx.driver().activateLease({
        ...call,
        lease: { ...call.lease, attributes: { ...call.lease.attributes, ...acquired.attributes } },
      });
      return { acquired, activated };
    } catch (error) {
      return { acquired, activationFailed: error as Error };
    }
  },
  async decide(trx: Db, ctx: CtxOf<'grant'>, granted: Granted | undefined) {
    const lease = ctx.object;
    const { resourceId, slot } = ctx.payload;
    if (!granted) {
      // Released (or served elsewhere) while the grant was on its way: give it back.
      // Rare, and known only from the effect: the resource takes it back.
      return done<'lease'>(`returned slot ${slot} of resource ${resourceId}: lease is ${lease.state}`, {
        followUps: [releaseSlot(lease, resourceId, `lease ${lease.id} does not need the slot`)],
      });
    }
    // Acquired and activated in this one command (docs/decisions/0025-a-grant-activates-the-lease.md).
    const limit = holdLimit(ctx);
    const acquiredMessage = `acquired slot ${slot} of resource ${resourceId}${limit.said}`;
    const held = { resource_id: resourceId, slot, attributes: mergedAttributes(lease.attributes, granted.acquired.attributes), ...limit.set };
    if ('activated' in granted) {
      const { heartbeat_deadline } = await deadlinesFromNow(trx, { heartbeatMs: lease.heartbeat_ms });
      return done<'lease'>(`${acquiredMessage}; active`, {
        to: 'active',
        through: { state: 'acquired', message: acquiredMessage },
        set: {
          ...held,
          attributes: mergedAttributes(lease.attributes, { ...granted.acquired.attributes, ...granted.activated.attributes }),
          ...(heartbeat_deadline ? { heartbeat_deadline } : {}),
        },
      });
    }
    // The slot is the lease's whatever its activation does. A permanent
    // failure breaks the lease at once, as the activation's own command
    // would; a transient one leaves it acquired with that command queued,
    // backing off, so a release (which supersedes it) finds a lease whose
    // slot is recorded and releases it at the driver.
    const failure = driverFailure('lease', 'acquired', ctx.command, granted.activationFailed);
    if (failure.status === 'failed') {
      return { ...failure, through: { state: 'acquired', message: acquiredMessage }, set: { ...held, ...failure.set } };
    }
    return done<'lease'>(`${acquiredMessage}; activation failed, retrying: ${granted.activationFailed.message}`, {
      to: 'acquired',
      set: held,
      events: failure.events,
      followUps: [send.lease.activate(lease.id, 'activation failed in its grant', { notBeforeMs: failure.retryInMs })],
    });
  },
} satisfies HandlerOf<'lease', 'grant'>;

/**
 * The hold a grant starts: when (the grant's own time, on the database's
 * clock), and on a blueprint with a longest hold, the time by which the
 * lease ends (`end_by`), when its holder is told so (`end_notice_at`), and
 * its expiry brought back to that end if it asked for later. Fixed here: a
 * later change of the blueprint's limit applies to leases granted after it.
 */
function holdLimit(ctx: CtxOf<'grant'>): { set: Partial<Record<'granted_at' | 'end_by' | 'end_notice_at' | 'expires_at', Date>>; said: string } {
  const grantedAt = ctx.command.created_at;
  const maxHoldMs = ctx.blueprint.max_hold_ms;
  const end = holdEndOf(grantedAt, maxHoldMs, ctx.object.reservation_ends_at);
  if (end === undefined) return { set: { granted_at: grantedAt }, said: '' };
  const { endBy, noticeAt } = end;
  const why =
    end.kind === 'reservation_end'
      ? `the end of reservation ${ctx.object.reservation_id}'s window`
      : describeTimeLimit(ctx.blueprint.name, maxHoldMs!);
  const expiry = ctx.object.expires_at;
  const capped = expiry !== null && expiry > endBy;
  return {
    set: {
      granted_at: grantedAt,
      end_by: endBy,
      end_notice_at: noticeAt,
      ...(capped ? { expires_at: endBy } : {}),
    },
    said: `; ends by ${formatTime(endBy)} at the latest (${why})${capped ? ', so its expiry was brought back to then' : ''}`,
  };
}

const deny = {
  shape: 'querying',
  async decide(trx: Db, ctx: CtxOf<'deny'>) {
    const lease = ctx.object;
    const { resourceId, reason } = ctx.payload;
    if (lease.state !== 'pending' || lease.resource_id !== null) return done<'lease'>(`ignored refusal: lease is ${lease.state}`);
    // The resource made for this lease broke: asking again would only make
    // another, so the lease fails instead, with the resource's reason. Its
    // state may already have moved on: the resource refuses the lease and
    // destroys itself in one drain, which may well end before this one
    // reads the refusal. Its log says whether it had broken when it
    // refused (an earlier refusal, for want of a slot, asks again).
    if (resourceId !== undefined) {
      const made = await trx
        .selectFrom('resources as r')
        .select('r.message')
        .where('r.id', '=', resourceId)
        .where('r.allocated_for_lease_id', '=', lease.id)
        .where(({ exists, selectFrom }) =>
          exists(
            selectFrom('events as e')
              .select('e.id')
              .where('e.target_kind', '=', 'resource')
              .whereRef('e.target_id', '=', 'r.id')
              .where('e.to_state', '=', 'broken')
              // The command's time read here: a JS Date would drop its microseconds.
              .where('e.created_at', '<=', selectFrom('commands').select('created_at').where('id', '=', ctx.command.id)),
          ),
        )
        .executeTakeFirst();
      if (made) {
        const message = `the resource allocated for it broke: ${made.message ?? reason}`;
        return failed<'lease'>(message, {
          to: 'broken',
          set: { message },
          followUps: [send.lease.destroy(lease.id, 'broken')],
        });
      }
    }
    return done<'lease'>(`resource ${resourceId ?? '?'} refused (${reason}); asking again`, {
      followUps: [send.lease.allocate(lease.id, `refused: ${reason}`, { notBeforeMs: RETRY_AFTER_DENY_MS })],
    });
  },
} satisfies HandlerOf<'lease', 'deny'>;

// An activation again, after the one in the lease's grant failed
// transiently (and a grant applied by a worker from before decision 0025,
// during a rolling upgrade).
const activate = {
  shape: 'effectful',
  read: heldResource,
  // The heartbeat deadline is counted on the database's clock.
  readsInTransaction: (ctx) => ctx.object.heartbeat_ms !== null,
  effect: (ctx: Ctx<ResourceIdentity>) => ctx.driver().activateLease(heldCall(ctx)),
  async decide(trx: Db, ctx: Ctx, result: DriverResult) {
    // The heartbeat clock starts now: the holder has something to beat for.
    const { heartbeat_deadline } = await deadlinesFromNow(trx, { heartbeatMs: ctx.object.heartbeat_ms });
    return done<'lease'>('active', {
      to: 'active',
      set: { attributes: mergedAttributes(ctx.object.attributes, result.attributes), ...(heartbeat_deadline ? { heartbeat_deadline } : {}) },
    });
  },
} satisfies HandlerOf<'lease', 'activate'>;

const renew = {
  shape: 'querying',
  async decide(trx: Db, ctx: CtxOf<'renew'>) {
    const lease = ctx.object;
    const { expiresInMs, heartbeatMs: newHeartbeatMs, heartbeatOnly } = ctx.payload;
    // Without a term of its own, a renewal extends an expiring lease by the
    // term it was given; a lease that never expired gains an expiry only
    // when asked for one. Likewise its heartbeat interval (v2). A beat
    // alone (v3) leaves the expiry as it is.
    const termMs = heartbeatOnly ? null : (expiresInMs ?? (lease.expires_at ? lease.term_ms : null));
    const heartbeatMs = newHeartbeatMs ?? lease.heartbeat_ms;
    if (!termMs && !heartbeatMs) return done<'lease'>('nothing to renew: the lease has no expiry and no heartbeat');
    const asked = await deadlinesFromNow(trx, { termMs, heartbeatMs });
    // No expiry past the time by which the lease ends: a renewal that asks
    // for more gets that time, and says so.
    const capped = asked.expires_at !== undefined && lease.end_by !== null && asked.expires_at > lease.end_by;
    const deadlines = capped ? { ...asked, expires_at: lease.end_by! } : asked;
    const ending = endingOf(lease.ending);
    const until = [
      deadlines.expires_at && `expires ${formatTime(deadlines.expires_at)}${capped ? ' (capped: the lease ends by then)' : ''}`,
      deadlines.heartbeat_deadline && `next heartbeat due by ${formatTime(deadlines.heartbeat_deadline)}`,
      ending && `ending by ${formatTime(new Date(ending.at))}: ${ending.reason}`,
    ].filter(Boolean);
    return done<'lease'>(`renewed: ${until.join('; ')}`, {
      set: { ...deadlines, ...(termMs ? { term_ms: termMs } : {}), ...(newHeartbeatMs ? { heartbeat_ms: newHeartbeatMs } : {}) },
      events: [{ type: 'renewed', message: until.join('; '), data: { ...deadlines, ...(ending ? { ending } : {}) } }],
    });
  },
} satisfies HandlerOf<'lease', 'renew'>;

/**
 * Tells the holder that Slipway will end the lease by a time, and why (the
 * timekeepers ask when its time limit nears): the lease's `ending`, which
 * every interface shows, an `ending` event, and the holder's callback. The
 * end itself is the lease's `end_by`, brought forward to the notice's time
 * if that is sooner; a later notice than the one given changes nothing.
 */
const notifyEnding = {
  shape: 'querying',
  async decide(trx: Db, ctx: CtxOf<'notify_ending'>) {
    const lease = ctx.object;
    const notice = ctx.payload;
    const at = new Date(notice.at);
    const given = endingOf(lease.ending);
    if (given && Date.parse(given.at) <= at.getTime()) {
      return done<'lease'>(`already told: it ends by ${formatTime(new Date(given.at))}`, { set: { end_notice_at: null } });
    }
    await tellHolder(trx, lease, ctx.command.id);
    const message = `ending by ${formatTime(at)}: ${notice.reason}`;
    return done<'lease'>(message, {
      set: {
        ending: JSON.stringify(notice),
        end_notice_at: null,
        ...(lease.end_by === null || lease.end_by > at ? { end_by: at } : {}),
      },
      events: [{ type: 'ending', message, data: notice }],
    });
  },
} satisfies HandlerOf<'lease', 'notify_ending'>;

/**
 * The expiry a lease gets back when the end it was told of is withdrawn:
 * its renewals were capped at that end, so one that expires then would be
 * released for an end that no longer stands before its holder's next
 * renewal. It gets its term from now (under its time limit, if any), as a
 * renewal now would have given it; an expiry short of that end stays.
 */
async function expiryGivenBack(trx: Db, lease: LeaseRow, endAt: string, endBy: Date | undefined): Promise<Date | undefined> {
  if (lease.expires_at === null || lease.term_ms === null || lease.expires_at.getTime() < Date.parse(endAt)) return undefined;
  const { expires_at: renewed } = await deadlinesFromNow(trx, { termMs: lease.term_ms });
  const given = endBy !== undefined && renewed! > endBy ? endBy : renewed!;
  return given > lease.expires_at ? given : undefined;
}

/**
 * Tells the holder that an end it was told of no longer stands (a
 * preemption withdrawn: the lease it was for went away): the lease's
 * `ending` is cleared, and its end is its time limit again, if its
 * blueprint has one (from its grant, under the blueprint's longest hold
 * now), with the notice of it to come.
 */
const withdrawEnding = {
  shape: 'querying',
  async decide(trx: Db, ctx: CtxOf<'withdraw_ending'>) {
    const lease = ctx.object;
    const given = endingOf(lease.ending);
    if (given?.kind !== ctx.payload.kind) return done<'lease'>(`nothing to withdraw: the lease was not told of a ${ctx.payload.kind} end`);
    const maxHoldMs = ctx.blueprint.max_hold_ms;
    const limit = lease.granted_at === null ? undefined : holdEndOf(lease.granted_at, maxHoldMs, lease.reservation_ends_at);
    const expires_at = await expiryGivenBack(trx, lease, given.at, limit?.endBy);
    await tellHolder(trx, lease, ctx.command.id);
    const message = `no longer ending by ${formatTime(new Date(given.at))}: ${ctx.payload.reason}${expires_at ? `; expires ${formatTime(expires_at)}` : ''}`;
    return done<'lease'>(message, {
      set: { ending: null, end_by: limit?.endBy ?? null, end_notice_at: limit?.noticeAt ?? null, ...(expires_at ? { expires_at } : {}) },
      events: [{ type: 'ending_withdrawn', message, data: { ...ctx.payload, at: given.at } }],
    });
  },
} satisfies HandlerOf<'lease', 'withdraw_ending'>;

/** Why the collector's conditional release of a lease found it no longer due, by who asked. */
const NOT_RELEASED: Readonly<Record<string, string>> = {
  'system:deadline': 'not released: the lease became active before its wait-deadline release was applied',
  'system:preemption': 'not released: its preemption was withdrawn before its end was applied',
};

const release = {
  shape: 'lockedBatch',
  read: heldResource,
  lockedBatch: releaseReturns,
  // A skipped expiry release looks again under the lease's row lock: a
  // plain release may have joined it since the effect looked. Only an
  // expiry release can be skipped; a plain one decides from its effect.
  // A slot given back asks what it left under the same locks; a lease
  // that leaves the line without one asks whether a preemption was for it.
  readsInTransaction: (ctx) => ctx.payload.ifExpired === true || slotResource(ctx) === undefined || ownReturn(ctx, slotResource(ctx)) !== undefined,
  async effect(ctx: CtxOf<'release', ResourceIdentity>) {
    if (!(await releaseWanted(ctx.db, ctx))) return { skipped: true };
    if (holdsSlot('lease', ctx.object.state)) await ctx.driver().releaseLease(heldCall(ctx));
    return { skipped: false };
  },
  async decide(trx: Db, ctx: CtxOf<'release'>, effect: { skipped: boolean }) {
    const lease = ctx.object;
    if (lease.state === 'broken') return done<'lease'>('already broken; it is being destroyed');
    if (effect.skipped) {
      // Someone's release may have joined this one since the effect looked.
      if (await releaseWanted(trx, ctx)) return yieldFor<'lease'>(0, 'a release from someone else joined this one; releasing');
      return done<'lease'>(NOT_RELEASED[ctx.command.issued_by] ?? 'not released: the lease was renewed before its expiry release was applied');
    }
    // Released and destroyed in this one command, its slot given back in
    // it too: a released lease has nothing else left to do, so a `destroy`
    // of its own would only cost a step, a command and a row version
    // (docs/decisions/0024-a-release-destroys-the-lease.md).
    // The slot it holds is the one its row records: a grant still on its
    // way finds the lease destroyed and returns its slot itself.
    // The collector's release (expiry, heartbeat or wait deadline): Slipway ends the lease itself.
    if (ctx.payload.ifExpired) await tellHolder(trx, lease, ctx.command.id);
    const resourceId = slotResource(ctx);
    const held = resourceId !== undefined;
    return done<'lease'>(held ? 'released and destroyed' : 'released before it got a slot, and destroyed', {
      to: 'destroyed',
      through: { state: 'released', message: held ? 'released' : 'released before it got a slot' },
      ...(held ? await endHold(trx, ctx, resourceId, 'released') : await leaveLine(trx, lease)),
    });
  },
} satisfies HandlerOf<'lease', 'release'>;

/**
 * A lease that leaves the line before it got a slot: if a preemption is
 * under way for it, its blueprint is told, to withdraw it (or give the
 * victim to another waiter); otherwise its row is removed as the line is
 * next read.
 */
async function leaveLine(trx: Db, lease: LeaseRow): Promise<{ followUps?: FollowUp[] }> {
  if (!(await isPreempting(trx, lease.id))) return {};
  return { followUps: [send.blueprint.serve_waiters(lease.blueprint_id, `lease ${lease.id}, which a preemption is for, left the line`)] };
}

// The resource's check found it gone: the lease cannot be used any more,
// whatever its holder does. It is broken with the check's reason (its
// holder sees why) and destroyed, which gives its slot back as any end
// does; the driver is not asked to release anything on a resource that
// no longer exists.
const resourceGone = {
  shape: 'querying',
  async decide(trx: Db, ctx: CtxOf<'resource_gone'>) {
    const lease = ctx.object;
    const { resourceId, reason } = ctx.payload;
    // A lease that holds a slot elsewhere is not this resource's (its
    // grant here never came through); one whose grant is still on its way
    // has no resource yet, and that grant would land on the gone one.
    if (lease.resource_id !== null && lease.resource_id !== resourceId)
      return done<'lease'>(`ignored: the lease is on resource ${lease.resource_id}`);
    await tellHolder(trx, lease, ctx.command.id);
    const message = `resource ${resourceId} is gone: ${reason}`;
    return done<'lease'>(message, { to: 'broken', set: { message }, followUps: [send.lease.destroy(lease.id, 'broken')] });
  },
} satisfies HandlerOf<'lease', 'resource_gone'>;

const destroy = {
  shape: 'lockedBatch',
  read: heldSlot,
  lockedBatch: destroyReturns,
  readsInTransaction: (ctx) => ownReturn(ctx, ctx.read) !== undefined,
  async decide(trx: Db, ctx: Ctx<number>) {
    // A grant still on its way finds the lease destroyed and returns its slot itself.
    const held = ctx.read;
    return done<'lease'>('destroyed', { to: 'destroyed', ...(held !== undefined ? await endHold(trx, ctx, held, 'destroyed') : {}) });
  },
} satisfies HandlerOf<'lease', 'destroy'>;

/**
 * A lease's side of the conversation. It never writes a resource's row: it
 * asks its blueprint for a slot (`need_resource`), and when it ends it
 * deletes its own slot row, which only makes room, and tells the resource
 * and the blueprint what they must hear, by message (slotsGivenBack.ts).
 */
export const LEASE_HANDLERS = {
  allocate,
  grant,
  deny,
  activate,
  renew,
  notify_ending: notifyEnding,
  withdraw_ending: withdrawEnding,
  release,
  resource_gone: resourceGone,
  destroy,
} satisfies HandlerTable<'lease'>;
