import { sql } from 'kysely';
import type { BlueprintRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { InvalidInputError } from '../../domain/errors.ts';
import { driverFactory, validateDriverSettings } from '../../drivers/registry.ts';
import { recordEvent } from '../../objects/recordEvent.ts';
import { appendInTransaction } from '../../queue/appendCommand.ts';
import { resourceWithFreeSlot, waitingLeaseCount } from '../sql/freeSlot.ts';
import { done, failed, type FollowUp, type HandlerContext, type HandlerTable, type Outcome } from '../Handler.ts';

type Ctx = HandlerContext<'blueprint'>;

const acquire = (resourceId: number, leaseId: number, reason: string): FollowUp => ({
  target: { kind: 'resource', id: resourceId },
  kind: 'acquire',
  payload: { leaseId },
  reason,
});

/**
 * Lock our own row before deciding: a resource freeing a slot reads it FOR
 * SHARE to see whether anyone waits, so the two decisions are ordered and a
 * freed slot and a new waiter can never miss each other.
 *
 * FOR NO KEY UPDATE, not FOR UPDATE: it must exclude those FOR SHARE reads,
 * but not the key-share lock that every new lease or resource row takes on
 * its blueprint (its foreign key). With FOR UPDATE the blueprint's drain
 * queued behind every lease being created, and a steady stream of them
 * (share lockers do not queue behind a waiting writer) starved it.
 */
async function lockedBlueprint(trx: Db, id: number): Promise<BlueprintRow> {
  return trx.selectFrom('blueprints').selectAll().where('id', '=', id).forNoKeyUpdate().executeTakeFirstOrThrow();
}

/**
 * Makes a resource: its row, its creation event and its first command
 * (allocate), for a lease that needs one or to keep the pool warm. Resource
 * creation, like lease creation, is the exception to "only the lock holder
 * writes a row": nobody else can know of the row yet. The caller counts it,
 * as the blueprint is the single writer of its resource count.
 */
async function makeResource(trx: Db, ctx: Ctx, blueprint: BlueprintRow, purpose: { leaseId: number } | { warm: true }): Promise<number> {
  const leaseId = 'leaseId' in purpose ? purpose.leaseId : null;
  const why = leaseId === null ? `kept warm (minimum ${blueprint.min_resources})` : `lease ${leaseId} needs a resource`;
  const resource = await trx
    .insertInto('resources')
    .values({ blueprint_id: blueprint.id, capacity: blueprint.leases_per_resource, allocated_for_lease_id: leaseId })
    .returning(['id', 'state'])
    .executeTakeFirstOrThrow();
  const actor = { issuedBy: ctx.command.issued_by, source: 'system' as const, requestId: ctx.command.request_id };
  const target = { kind: 'resource', id: resource.id } as const;
  const { command } = await appendInTransaction(
    trx,
    { target, kind: 'allocate', causedBy: ctx.command.id, actor: { ...actor, reason: why } },
    { fromOutside: false },
  );
  await recordEvent(trx, {
    target,
    type: 'created',
    toState: resource.state,
    message: `made by blueprint ${blueprint.name}: ${why}`,
    actor,
    commandId: command.id,
  });
  return resource.id;
}

/** Makes a resource for a lease and sends the lease's acquire to it. */
async function allocateFor(trx: Db, ctx: Ctx, blueprint: BlueprintRow, leaseId: number): Promise<Outcome<'blueprint'>> {
  const resourceId = await makeResource(trx, ctx, blueprint, { leaseId });
  const live = blueprint.live_resources + 1;
  return done(`allocating resource ${resourceId} for lease ${leaseId} (${live} of ${blueprint.max_resources})`, {
    set: { live_resources: live },
    events: [{ type: 'resource_allocated', message: `resource ${resourceId} for lease ${leaseId}`, data: { resourceId, leaseId } }],
    followUps: [acquire(resourceId, leaseId, `made for lease ${leaseId}`)],
  });
}

/** Oldest waiting leases that still want a slot; waiters whose lease moved on are dropped. */
async function takeWaiters(trx: Db, blueprintId: number, count: number): Promise<number[]> {
  if (count <= 0) return [];
  await trx
    .deleteFrom('blueprint_waiters')
    .where('blueprint_id', '=', blueprintId)
    .where('lease_id', 'in', (eb) =>
      eb.selectFrom('leases').select('id').where('blueprint_id', '=', blueprintId).where('state', '!=', 'pending'),
    )
    .execute();
  const taken = await trx
    .deleteFrom('blueprint_waiters')
    .where('lease_id', 'in', (eb) =>
      eb.selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', blueprintId).orderBy('since').orderBy('lease_id').limit(count),
    )
    .returning(['lease_id', 'since'])
    .execute();
  return taken.sort((a, b) => a.since.getTime() - b.since.getTime() || a.lease_id - b.lease_id).map((w) => w.lease_id);
}

/**
 * The blueprint is the single writer of its resource count: it alone decides
 * whether a new resource may be made within the limit, and it keeps the
 * queue of leases waiting for capacity.
 */
export const BLUEPRINT_HANDLERS = {
  need_resource: {
    async decide(trx: Db, ctx: Ctx) {
      const blueprint = await lockedBlueprint(trx, ctx.object.id);
      const { leaseId } = ctx.payload as { leaseId: number };
      const lease = await trx.selectFrom('leases').select(['state', 'resource_id', 'created_at']).where('id', '=', leaseId).executeTakeFirst();
      if (!lease || lease.state !== 'pending' || lease.resource_id !== null) return done<'blueprint'>(`lease ${leaseId} no longer needs capacity`);

      const making = await trx
        .selectFrom('resources')
        .select('id')
        .where('allocated_for_lease_id', '=', leaseId)
        .where('state', 'in', ['pending', 'active'])
        .executeTakeFirst();
      if (making) return done<'blueprint'>(`resource ${making.id} is already being made for lease ${leaseId}`, { followUps: [acquire(making.id, leaseId, `made for lease ${leaseId}`)] });

      const free = await resourceWithFreeSlot(trx, blueprint.id);
      const waiting = await waitingLeaseCount(trx, blueprint.id);
      if (free !== undefined && waiting === 0) return done<'blueprint'>(`sent lease ${leaseId} to resource ${free}`, { followUps: [acquire(free, leaseId, `free slot for lease ${leaseId}`)] });

      if (blueprint.state === 'enabled' && blueprint.live_resources < blueprint.max_resources && waiting === 0) {
        return allocateFor(trx, ctx, blueprint, leaseId);
      }
      await trx
        .insertInto('blueprint_waiters')
        .values({ blueprint_id: blueprint.id, lease_id: leaseId, since: lease.created_at })
        .onConflict((oc) => oc.column('lease_id').doNothing())
        .execute();
      const why = blueprint.state !== 'enabled' ? `blueprint is ${blueprint.state}` : `at its limit of ${blueprint.max_resources} resource(s)`;
      return done<'blueprint'>(`lease ${leaseId} waits (${why}; ${waiting + 1} waiting)`, {
        events: [{ type: 'lease_waiting', message: `lease ${leaseId} waits: ${why}`, data: { leaseId } }],
      });
    },
  },

  slot_freed: {
    async decide(trx: Db, ctx: Ctx) {
      const blueprint = await lockedBlueprint(trx, ctx.object.id);
      const { resourceId } = ctx.payload as { resourceId: number };
      const resource = await trx.selectFrom('resources').select(['state', 'capacity', 'used_slots']).where('id', '=', resourceId).executeTakeFirst();
      if (!resource || resource.state !== 'active') return done<'blueprint'>(`resource ${resourceId} is ${resource?.state ?? 'gone'}`);
      // Slots already promised by acquires still in the resource's queue are not free.
      const promised = await trx
        .selectFrom('commands')
        .select(sql<number>`count(*)::int`.as('n'))
        .where('target_kind', '=', 'resource')
        .where('target_id', '=', resourceId)
        .where('kind', '=', 'acquire')
        .where('status', 'in', ['queued', 'running'])
        .executeTakeFirstOrThrow();
      const leases = await takeWaiters(trx, blueprint.id, resource.capacity - resource.used_slots - promised.n);
      return done<'blueprint'>(leases.length ? `sent waiting lease(s) ${leases.join(', ')} to resource ${resourceId}` : 'nobody waiting', {
        followUps: leases.map((leaseId) => acquire(resourceId, leaseId, `lease ${leaseId} waited for a slot`)),
      });
    },
  },

  resource_destroyed: {
    async decide(trx: Db, ctx: Ctx) {
      const blueprint = await lockedBlueprint(trx, ctx.object.id);
      const { resourceId } = ctx.payload as { resourceId: number };
      const counted = { ...blueprint, live_resources: blueprint.live_resources - 1 };
      const [next] = counted.state === 'enabled' && counted.live_resources < counted.max_resources ? await takeWaiters(trx, blueprint.id, 1) : [];
      if (next !== undefined) {
        const outcome = await allocateFor(trx, ctx, counted, next);
        return { ...outcome, message: `resource ${resourceId} gone; ${outcome.message}` };
      }
      return done<'blueprint'>(`resource ${resourceId} gone (${counted.live_resources} of ${counted.max_resources})`, {
        set: { live_resources: counted.live_resources },
      });
    },
  },

  /**
   * New driver settings, and the blueprint's resources brought in line with
   * them: the driver names the live resources that no longer fit (they are
   * retired) and may set the resource limit; a raised limit serves waiting
   * leases at once. The new settings apply to every driver call from the
   * next drain on (drivers are made per blueprint version).
   */
  update_settings: {
    async decide(trx: Db, ctx: Ctx) {
      const blueprint = await lockedBlueprint(trx, ctx.object.id);
      let settings: unknown;
      try {
        settings = validateDriverSettings(blueprint.driver, (ctx.payload as { settings: unknown }).settings);
      } catch (error) {
        if (error instanceof InvalidInputError) return failed<'blueprint'>(error.message);
        throw error;
      }
      const plan = (await driverFactory(blueprint.driver).reconcile?.(trx, blueprint.id, settings)) ?? { retire: [] };
      const counted = { ...blueprint, max_resources: plan.maxResources ?? blueprint.max_resources };
      const room = counted.state === 'enabled' ? counted.max_resources - counted.live_resources : 0;
      const allocations: Outcome<'blueprint'>[] = [];
      for (const leaseId of await takeWaiters(trx, blueprint.id, room)) {
        allocations.push(await allocateFor(trx, ctx, counted, leaseId));
        counted.live_resources++;
      }
      const retired = plan.retire.map((r) => r.resourceId);
      const limit = counted.max_resources === blueprint.max_resources ? '' : `; limit ${blueprint.max_resources} → ${counted.max_resources}`;
      return done<'blueprint'>(
        `settings updated${retired.length ? `; retiring resource(s) ${retired.join(', ')}` : ''}${limit}` +
          allocations.map((a) => `; ${a.message}`).join(''),
        {
          set: { settings: JSON.stringify(settings), max_resources: counted.max_resources, live_resources: counted.live_resources },
          events: [
            { type: 'settings_updated', message: `driver settings replaced${limit}`, data: { retired, maxResources: counted.max_resources } },
            ...allocations.flatMap((a) => a.events ?? []),
          ],
          followUps: [
            ...plan.retire.map(({ resourceId, reason }): FollowUp => ({ target: { kind: 'resource', id: resourceId }, kind: 'retire', reason })),
            ...allocations.flatMap((a) => a.followUps ?? []),
          ],
        },
      );
    },
  },

  top_up: {
    async decide(trx: Db, ctx: Ctx) {
      const blueprint = await lockedBlueprint(trx, ctx.object.id);
      // Resources that are, or are becoming, ready: pending or active, with
      // no release or reclaim on their way.
      const warm = await trx
        .selectFrom('resources')
        .select(sql<number>`count(*)::int`.as('n'))
        .where('blueprint_id', '=', blueprint.id)
        .where('state', 'in', ['pending', 'active'])
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('commands')
                .select('id')
                .where('target_kind', '=', 'resource')
                .whereRef('target_id', '=', 'resources.id')
                .where('kind', 'in', ['release', 'reclaim'])
                .where('status', 'in', ['queued', 'running']),
            ),
          ),
        )
        .executeTakeFirstOrThrow();
      const missing = Math.min(blueprint.min_resources - warm.n, blueprint.max_resources - blueprint.live_resources);
      if (missing <= 0) {
        return done<'blueprint'>(`${warm.n} warm of a minimum of ${blueprint.min_resources}; nothing to make${warm.n < blueprint.min_resources ? ' (at the limit)' : ''}`);
      }
      const made: number[] = [];
      for (let i = 0; i < missing; i++) made.push(await makeResource(trx, ctx, blueprint, { warm: true }));
      const live = blueprint.live_resources + missing;
      return done<'blueprint'>(`making ${missing} resource(s) (${made.join(', ')}) to keep ${blueprint.min_resources} warm (${live} of ${blueprint.max_resources})`, {
        set: { live_resources: live },
        events: [{ type: 'topped_up', message: `made resource(s) ${made.join(', ')} to keep the pool warm`, data: { resourceIds: made } }],
      });
    },
  },
} satisfies HandlerTable<'blueprint'>;
