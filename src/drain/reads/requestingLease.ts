import { sql } from 'kysely';
import type { Db } from '../../db/Database.ts';
import { perStep } from '../perStep.ts';
import { RUN_LENGTH } from '../sql/runs.ts';

/** What a blueprint's `need_resource` decides from: the lease, and a resource already being made for it. */
export interface RequestingLease {
  readonly state: string;
  readonly resource_id: number | null;
  readonly created_at: Date;
  readonly making: number | null;
}

/** The leases read in the step so far, by id, and the blueprints whose queued requests were read. */
const readInStep = perStep(() => ({ leases: new Map<number, RequestingLease>(), blueprints: new Set<number>() }));

/**
 * The lease a `need_resource` at `blueprintId` is for, as the blueprint's
 * decision reads it in its step's transaction. The first request a step
 * decides at a blueprint reads, in the same round trip, the leases of the
 * requests queued behind it there (as many as a run takes): a burst of
 * requests (a backlog of new leases, most of them released before their
 * blueprint gets to them) is then decided from one read rather than one
 * each.
 *
 * A read made earlier in the step may be stale in one way only: a lease
 * read `pending` may have been released since, which the line and the
 * resource's `acquire` both allow for (a lease that left the line, a slot
 * offered to a lease that no longer wants it). A lease never returns to
 * `pending`, and only this blueprint's decisions make resources for its
 * leases, so each entry is used once: a second request of one lease in a
 * step reads again, and sees a resource an earlier decision made.
 */
export async function requestingLease(trx: Db, blueprintId: number, leaseId: number): Promise<RequestingLease | undefined> {
  const step = readInStep(trx);
  if (!step.leases.has(leaseId)) {
    const burst = !step.blueprints.has(blueprintId);
    step.blueprints.add(blueprintId);
    for (const row of await readLeases(trx, blueprintId, leaseId, burst)) step.leases.set(row.id, row);
  }
  const lease = step.leases.get(leaseId);
  step.leases.delete(leaseId);
  return lease;
}

function readLeases(trx: Db, blueprintId: number, leaseId: number, burst: boolean) {
  return trx
    .selectFrom('leases as l')
    .select(['l.id', 'l.state', 'l.resource_id', 'l.created_at'])
    .select((eb) =>
      eb
        .selectFrom('resources as r')
        .select('r.id')
        .whereRef('r.allocated_for_lease_id', '=', 'l.id')
        .where('r.state', 'in', ['pending', 'active'])
        .limit(1)
        .as('making'),
    )
    .where((eb) =>
      burst
        ? eb.or([
            eb('l.id', '=', leaseId),
            eb(
              'l.id',
              'in',
              eb
                .selectFrom('commands as c')
                .select(sql<number>`(c.payload->>'leaseId')::bigint`.as('lease_id'))
                .where('c.target_kind', '=', 'blueprint')
                .where('c.target_id', '=', blueprintId)
                .where('c.status', 'in', ['queued', 'running'])
                .where('c.kind', '=', 'need_resource')
                .orderBy('c.id')
                .limit(RUN_LENGTH),
            ),
          ])
        : eb('l.id', '=', leaseId),
    )
    .execute();
}
