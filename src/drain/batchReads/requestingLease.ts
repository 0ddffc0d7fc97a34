import { sql } from 'kysely';
import type { CommandRow, CommandStatus } from '../../../migrations/schema.ts';
import { compiledOnce } from '../../db/compiledOnce.ts';
import type { Db } from '../../db/Database.ts';
import { executePrepared } from '../../db/PreparingClient.ts';
import { COMMAND_KINDS } from '../../domain/commandKinds.ts';
import type { HandlerContext } from '../Handler.ts';
import { perStep } from '../../db/perStep.ts';

/** What a blueprint's `need_resource` decides from: the lease, and a resource already being made for it. */
export interface RequestingLease {
  readonly state: string;
  readonly resource_id: number | null;
  readonly created_at: Date;
  readonly priority: number;
  readonly team: string;
  readonly holder: string;
  /** Canonical selector text, or null. */
  readonly selector: string | null;
  /** The reservation it was created to use (decision 0045), or null. */
  readonly reservation_id: number | null;
  readonly making: number | null;
  /** A resource it was sent to whose acquire is still on its way (read when the lease is). */
  readonly sentTo: number | null;
  /**
   * A resource whose slot it holds: granted there, the grant not yet applied
   * to the lease (which is still pending, with no resource), or a refusal of
   * an earlier acquire crossing that grant would put it back in line.
   */
  readonly holding: number | null;
}

/** The leases read in the step since the line was last served, by id. */
const readInStep = perStep(() => new Map<number, RequestingLease>());

/**
 * The lease a queued command asks for, if it is a request for a slot. A
 * payload its schema refuses asks for none here: read ahead for nothing,
 * it fails in its own step.
 */
function requested(command: CommandRow): number | undefined {
  if (command.kind !== 'need_resource') return undefined;
  const payload = COMMAND_KINDS.blueprint.need_resource.versions[0].safeParse(command.payload);
  return payload.success ? payload.data.leaseId : undefined;
}

/**
 * The lease a `need_resource` is for, as the blueprint's decision reads it
 * in its step's transaction. A read that finds the lease not yet read in
 * the step reads, in the same round trip, the leases of the requests queued
 * behind it (`ctx.queued`, which the step may decide next in its run): a
 * burst of requests (a backlog of new leases, most of them released before
 * their blueprint gets to them) is then decided from one read rather than
 * one each.
 *
 * A read made earlier in the step may be stale in two ways. A lease read
 * `pending` may have been released since, which the line and the
 * resource's `acquire` both allow for (a lease that left the line, a slot
 * offered to a lease that no longer wants it); a lease never returns to
 * `pending`. And a decision of the step may have served it from the line,
 * making a resource for it: only this blueprint's decisions do, and serving
 * the line forgets every lease read so far (forgetRequestingLeases), so a
 * request after it (a lease's second request in the step, say) reads again
 * and sees that resource.
 */
export async function requestingLease(trx: Db, ctx: HandlerContext<'blueprint', { leaseId: number }>): Promise<RequestingLease | undefined> {
  const { leaseId } = ctx.payload;
  const step = readInStep(trx);
  if (!step.has(leaseId)) {
    const ahead = ctx.queued.map(requested).filter((id): id is number => id !== undefined && !step.has(id));
    for (const row of await readLeases(trx, [leaseId, ...ahead])) step.set(row.id, row);
  }
  return step.get(leaseId);
}

/** Forgets the leases read in the step: the line was served, and a lease served may have a resource being made for it now. */
export function forgetRequestingLeases(trx: Db): void {
  readInStep(trx).clear();
}

/**
 * Prepared (executePrepared): its constants are literals, so the partial
 * indexes it relies on serve whatever plan PostgreSQL keeps. Compiled once:
 * every request for a slot reads it.
 */
const readLeasesQuery = compiledOnce(
  (db, ids: readonly number[]) =>
    db
      .selectFrom('leases as l')
      .select(['l.id', 'l.state', 'l.resource_id', 'l.created_at', 'l.priority', 'l.team', 'l.holder', 'l.selector', 'l.reservation_id'])
      .select((eb) =>
        eb
          .selectFrom('resources as r')
          .select('r.id')
          .whereRef('r.allocated_for_lease_id', '=', 'l.id')
          .where('r.state', 'in', [sql.lit('pending'), sql.lit('active')])
          .limit(sql.lit(1))
          .as('making'),
      )
      .select((eb) =>
        eb
          .selectFrom('commands as c')
          .select('c.target_id')
          .where('c.target_kind', '=', sql.lit('resource'))
          .where('c.kind', '=', sql.lit('acquire'))
          .where('c.status', 'in', [sql.lit<CommandStatus>('queued'), sql.lit<CommandStatus>('running')])
          .where(sql<boolean>`(c.payload->>'leaseId')::bigint = l.id`)
          .limit(sql.lit(1))
          .as('sentTo'),
      )
      .select((eb) => eb.selectFrom('resource_slots as s').select('s.resource_id').whereRef('s.lease_id', '=', 'l.id').as('holding'))
      .where('l.id', '=', (eb) => eb.fn.any(eb.val(ids))),
  [],
);

function readLeases(trx: Db, ids: readonly number[]) {
  return executePrepared(trx, readLeasesQuery([...new Set(ids)]));
}

/** One lease as the blueprint's `need_resource` reads it, outside a step (a lease's explanation, src/drain/explainLease.ts). */
export async function readRequestingLease(trx: Db, leaseId: number): Promise<(RequestingLease & { id: number }) | undefined> {
  return (await readLeases(trx, [leaseId]))[0];
}
