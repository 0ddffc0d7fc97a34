import { sql } from 'kysely';
import type { BlueprintRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import type { CommandKindOf, PayloadOf } from '../../domain/commandKinds.ts';
import { InvalidInputError } from '../../domain/errors.ts';
import { statesAccepting, statesWith } from '../../domain/lifecycle.ts';
import { driverFactory, possibleLabelsColumn, validateDriverSettings } from '../../drivers/registry.ts';
import { makeResource } from '../../objects/makeResource.ts';
import { done, failed, type HandlerContext, type QueryingHandler, type HandlerTable, type Outcome } from '../Handler.ts';
import { send } from '../messages.ts';
import { requestingLease } from '../batchReads/requestingLease.ts';
import { placeInLine } from '../../domain/priority.ts';
import { parseSelector } from '../../domain/labels.ts';
import { destroyOrphan } from './destroyOrphan.ts';
import { RESERVATION_MOMENTS } from '../../domain/reservations.ts';
import { type Joining, type LineCount, type Serving, servedInStep, serveWaitingLine } from './waitingLine.ts';

/**
 * What one command decides, on the blueprint's locked row, before the
 * waiting line is served; `joining` is the lease that comes to the line,
 * served with it in its place, and whose place the message then tells if it
 * still waits.
 */
type Decision = Outcome<'blueprint'> & {
  readonly joining?: Joining;
  /**
   * The decision changed neither the line nor the room: the line, served
   * after the command before, is still served (a request from a lease that
   * no longer needs a slot costs one read, however long the line).
   */
  readonly lineAsItWas?: true;
};
type Decide<C extends CommandKindOf<'blueprint'>> = (
  trx: Db,
  ctx: HandlerContext<'blueprint', PayloadOf<'blueprint', C>>,
  blueprint: BlueprintRow,
) => Promise<Decision>;

/**
 * Every command the blueprint drains is followed, in the same transaction,
 * by serving its waiting line from whatever room the blueprint has as the
 * command leaves it (see waitingLine.ts). So the invariant "no lease waits
 * while there is room" holds after any command, present or future, and no
 * handler has to know which of its changes make room. Only a decision that
 * says it changed neither (`lineAsItWas`) leaves the line as the command
 * before served it.
 *
 * It decides on the row it is given, locked: the step's transaction begins
 * by locking its objects' rows FOR NO KEY UPDATE and checking their
 * versions (sql/lockVersions.ts), and only the blueprint's drain, or an
 * operator's update holding its lock, writes the row. That lock is what
 * orders a decision against a resource freeing a slot, which reads the row
 * FOR SHARE to see whether anyone waits: a freed slot and a new waiter never
 * miss each other.
 *
 * The bursts a blueprint gets (leases asking for slots, resources offering
 * them) join runs (`inRuns`): each decision of a run is made on the row as
 * the one before left it, and reads the line and the resources, which the
 * decisions write themselves; the slots promised to acquires that the
 * step's commit has not written yet are counted from the step's own
 * promises (waitingLine.ts).
 */
function servingTheLine<C extends CommandKindOf<'blueprint'>>(
  decide: Decide<C>,
  inRuns: boolean,
): QueryingHandler<'blueprint', PayloadOf<'blueprint', C>, true> {
  return {
    shape: 'querying',
    ...(inRuns ? { inRuns } : {}),
    async decide(trx, ctx) {
      const blueprint = ctx.object;
      const { joining, lineAsItWas, ...decision } = await decide(trx, ctx, blueprint);
      if (lineAsItWas) return decision;
      const after = { ...blueprint, ...decision.set, state: decision.to ?? blueprint.state } as BlueprintRow;
      return withServing(decision, after, await serveWaitingLine(trx, after, ctx.command, joining), joining?.leaseId);
    },
  };
}

/** The command's outcome with the line's serving added: the resources made, the acquires sent, and what each lease got. */
function withServing(decision: Outcome<'blueprint'>, after: BlueprintRow, serving: Serving, joined: number | undefined): Outcome<'blueprint'> {
  const { joinedAhead: ahead, waiting } = serving;
  const counted = ({ n, orMore }: LineCount) => `${n}${orMore ? ' or more' : ''}`;
  const joinedWhy = serving.joinedWhy ?? serving.why;
  const still = ahead
    ? `lease ${joined} waits (${joinedWhy}; ${counted(ahead)} waiting ahead)`
    : waiting.n > 0
      ? `${counted(waiting)} lease(s) wait (${serving.why})`
      : '';
  const made = serving.liveResources !== after.live_resources;
  return {
    ...decision,
    message: [decision.message, ...serving.served.values(), still].filter(Boolean).join('; '),
    ...(made ? { set: { ...decision.set, live_resources: serving.liveResources } } : {}),
    events: [
      ...(decision.events ?? []),
      ...serving.events,
      ...(ahead
        ? [
            {
              type: 'lease_waiting',
              message: `lease ${joined} waits: ${joinedWhy}; ${counted(ahead)} waiting ahead`,
              data: { leaseId: joined, ahead: ahead.n, ...(ahead.orMore ? { orMore: true } : {}) },
            },
          ]
        : []),
    ],
    followUps: [...(decision.followUps ?? []), ...serving.followUps],
  };
}

/** A lease wants a slot (a new lease, or one refused): it joins the line, served at once if there is room. */
const needResource: Decide<'need_resource'> = async (trx, ctx, blueprint) => {
  const { leaseId } = ctx.payload;
  const lease = await requestingLease(trx, ctx);
  if (lease?.state !== 'pending' || lease.resource_id !== null) {
    return { ...done<'blueprint'>(`lease ${leaseId} no longer needs capacity`), lineAsItWas: true };
  }
  if (lease.making !== null) {
    return {
      ...done<'blueprint'>(`resource ${lease.making} is already being made for lease ${leaseId}`, {
        followUps: [send.resource.acquire(lease.making, { leaseId }, `made for lease ${leaseId}`)],
      }),
      lineAsItWas: true,
    };
  }
  // Sent to a resource already (a request that crossed the decision that
  // served it): the resource's answer decides; a refusal asks again.
  const sentTo = lease.sentTo ?? servedInStep(trx, leaseId);
  if (sentTo !== undefined && sentTo !== null) {
    return { ...done<'blueprint'>(`lease ${leaseId} was already sent to resource ${sentTo}`), lineAsItWas: true };
  }
  // Granted a slot already, the grant on its way to the lease: a request
  // from a refusal that crossed it would otherwise leave a row in the line
  // for a lease that is about to be active.
  if (lease.holding !== null) {
    return { ...done<'blueprint'>(`lease ${leaseId} already holds a slot on resource ${lease.holding}`), lineAsItWas: true };
  }
  return {
    ...done<'blueprint'>(`lease ${leaseId} needs a slot`),
    joining: {
      leaseId,
      since: placeInLine(lease.created_at, lease.priority, blueprint.priority_step_ms),
      requestedAt: lease.created_at,
      priority: lease.priority,
      team: lease.team,
      holder: lease.holder,
      selector: lease.selector === null ? undefined : parseSelector(lease.selector),
      ...(lease.reservation_id === null ? {} : { reservationId: lease.reservation_id }),
    },
  };
};

/** A resource has a slot the line may take (counted, with any others, by serving the line). */
const slotFreed: Decide<'slot_freed'> = async (_trx, ctx) => done<'blueprint'>(`resource ${ctx.payload.resourceId} has a free slot`);

/**
 * A resource is gone: counted out (the line is served from the room that
 * makes). Below its warm minimum, the blueprint asks itself to `top_up`
 * now rather than at the collector's next pass: a resource found gone by
 * a check is replaced within seconds. (Every resource released or
 * reclaimed is destroyed in the end and counted out here, so the live
 * count is the one to compare; `top_up` then counts what is warm.)
 */
const resourceDestroyed: Decide<'resource_destroyed'> = async (_trx, ctx, blueprint) => {
  const { resourceId } = ctx.payload;
  const live = blueprint.live_resources - 1;
  const belowMinimum = blueprint.state === 'enabled' && live < blueprint.min_resources;
  return done<'blueprint'>(`resource ${resourceId} gone (${live} of ${blueprint.max_resources})`, {
    set: { live_resources: live },
    ...(belowMinimum
      ? {
          followUps: [
            send.blueprint.top_up(blueprint.id, `resource ${resourceId} gone: ${live} live of a warm minimum of ${blueprint.min_resources}`),
          ],
        }
      : {}),
  });
};

/** The blueprint's limits or state changed (updateBlueprint.ts): the line is served from the room that made. */
const serveWaiters: Decide<'serve_waiters'> = async () => done<'blueprint'>('limits or state changed');

/**
 * A moment of a reservation's window (decision 0045): its end, or the time
 * to hand back the slots its leases do not use. The slots it held back go to
 * the line, which serving it does; the timeline says so.
 */
const reservationDue: Decide<'reservation_due'> = async (_trx, ctx) => {
  const { reservationId, moment } = ctx.payload;
  const message = `reservation ${reservationId}: ${RESERVATION_MOMENTS[moment]}`;
  return done<'blueprint'>(message, { events: [{ type: `reservation_${moment}`, message, data: { reservationId } }] });
};

/**
 * New driver settings, and the blueprint's resources brought in line with
 * them: the driver names the live resources that no longer fit (they are
 * retired) and may set the resource limit (a raised one serves the line,
 * like any room). The new settings apply to every driver call from the
 * next drain on (drivers are made per blueprint version).
 */
const updateSettings: Decide<'update_settings'> = async (trx, ctx, blueprint) => {
  let settings: unknown;
  try {
    settings = validateDriverSettings(blueprint.driver, ctx.payload.settings);
  } catch (error) {
    if (error instanceof InvalidInputError) return failed<'blueprint'>(error.message);
    throw error;
  }
  const plan = (await driverFactory(blueprint.driver).reconcile?.(trx, blueprint.id, settings)) ?? { retire: [] };
  const maxResources = plan.maxResources ?? blueprint.max_resources;
  const retired = plan.retire.map((r) => r.resourceId);
  const limit = maxResources === blueprint.max_resources ? '' : `; limit ${blueprint.max_resources} → ${maxResources}`;
  return done<'blueprint'>(`settings updated${retired.length ? `; retiring resource(s) ${retired.join(', ')}` : ''}${limit}`, {
    // As given, like createBlueprint's: defaults stay the code's.
    set: {
      settings: JSON.stringify(ctx.payload.settings),
      possible_labels: possibleLabelsColumn(blueprint.driver, settings),
      max_resources: maxResources,
    },
    events: [{ type: 'settings_updated', message: `driver settings replaced${limit}`, data: { retired, maxResources } }],
    followUps: plan.retire.map(({ resourceId, reason }) => send.resource.retire(resourceId, reason)),
  });
};

// Untyped context (they read no payload), so each also decides its old name (drain, undrain).
const cordon = async (trx: Db, _ctx: unknown, blueprint: BlueprintRow) => fanOut(trx, blueprint, 'cordon');

const uncordon = async (trx: Db, _ctx: unknown, blueprint: BlueprintRow) => fanOut(trx, blueprint, 'uncordon');

const topUp: Decide<'top_up'> = async (trx, ctx, blueprint) => {
  // Resources that are, or are becoming, ready: being set up or granting
  // slots, with no release or reclaim on their way.
  const warm = await trx
    .selectFrom('resources')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('blueprint_id', '=', blueprint.id)
    .where('state', 'in', [...statesWith('resource', 'isSettingUp'), ...statesWith('resource', 'grantsSlots')])
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
    return done<'blueprint'>(
      `${warm.n} warm of a minimum of ${blueprint.min_resources}; nothing to make${warm.n < blueprint.min_resources ? ' (at the limit)' : ''}`,
    );
  }
  const made: number[] = [];
  for (let i = 0; i < missing; i++) made.push(await makeResource(trx, blueprint, ctx.command, { warm: true }));
  const live = blueprint.live_resources + missing;
  return done<'blueprint'>(
    `making ${missing} resource(s) (${made.join(', ')}) to keep ${blueprint.min_resources} warm (${live} of ${blueprint.max_resources})`,
    {
      set: { live_resources: live },
      events: [{ type: 'topped_up', message: `made resource(s) ${made.join(', ')} to keep the pool warm`, data: { resourceIds: made } }],
    },
  );
};
/** Each command kind's decision, its payload typed by the kind's schema (an orphan's destroy calls the driver instead: destroyOrphan.ts). */
const DECISIONS: { readonly [C in Exclude<CommandKindOf<'blueprint'>, 'destroy_orphan'>]: Decide<C> } = {
  need_resource: needResource,
  slot_freed: slotFreed,
  resource_destroyed: resourceDestroyed,
  serve_waiters: serveWaiters,
  reservation_due: reservationDue,
  update_settings: updateSettings,
  cordon,
  uncordon,
  // The old names, as processes of the release before still append them (decision 0036).
  drain: cordon,
  undrain: uncordon,
  top_up: topUp,
};

/**
 * A blueprint's cordon or uncordon: the same command sent to each of its
 * resources in a state that takes it. The line is left as it was: the room
 * changes as each resource applies its own command (an uncordoned one offers
 * its free slots to the line, as any freed slot is offered).
 */
async function fanOut(trx: Db, blueprint: BlueprintRow, kind: 'cordon' | 'uncordon'): Promise<Decision> {
  const resources = await trx
    .selectFrom('resources')
    .select('id')
    .where('blueprint_id', '=', blueprint.id)
    .where('state', 'in', statesAccepting('resource', kind))
    .orderBy('id')
    .execute();
  const ids = resources.map((r) => r.id);
  return {
    ...done<'blueprint'>(ids.length === 0 ? `no resource to ${kind}` : `${kind}ing resource(s) ${ids.join(', ')}`, {
      followUps: ids.map((id) => send.resource[kind](id, `blueprint ${blueprint.name}: ${kind}`)),
    }),
    lineAsItWas: true,
  };
}

/**
 * The kinds whose decisions join runs: the bursts, each deciding from the
 * row, the line and the resources alone. Not `top_up` (it counts the release
 * and reclaim commands queued at resources) nor `update_settings` (its
 * driver reconciles from rows of its own).
 */
const IN_RUNS: ReadonlySet<string> = new Set<CommandKindOf<'blueprint'>>(['need_resource', 'slot_freed', 'resource_destroyed', 'serve_waiters']);

/**
 * The blueprint is the single writer of its resource count: it alone decides
 * whether a new resource may be made within the limit, and it keeps the line
 * of leases waiting for capacity.
 */
export const BLUEPRINT_HANDLERS: HandlerTable<'blueprint'> = {
  ...Object.fromEntries(Object.entries(DECISIONS).map(([kind, decide]) => [kind, servingTheLine(decide, IN_RUNS.has(kind))])),
  destroy_orphan: destroyOrphan,
};
