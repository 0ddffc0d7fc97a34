import type { BlueprintRow, CommandRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { systemActorName } from '../domain/Actor.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { recordEvent } from '../db/recordEvent.ts';

/**
 * Makes a resource of `blueprint`: its row, its creation event and its first
 * command (allocate), for a lease that needs one or to keep the pool warm.
 * Called only by the blueprint's drain (`cause` is the command it applies),
 * which counts the resource, as the blueprint is the single writer of its
 * resource count. Resource creation, like lease creation, is the exception to
 * "only the lock holder writes a row": nobody else can know of the row yet.
 */
export async function makeResource(
  trx: Db,
  blueprint: BlueprintRow,
  cause: CommandRow,
  purpose: { leaseId: number; selector?: string | null } | { warm: true },
): Promise<number> {
  const leaseId = 'leaseId' in purpose ? purpose.leaseId : null;
  // A driver choosing what to allocate (a static pool's entry) picks what the lease's selector matches.
  const selector = 'leaseId' in purpose ? (purpose.selector ?? null) : null;
  const why = leaseId === null ? `kept warm (minimum ${blueprint.min_resources})` : `lease ${leaseId} needs a resource`;
  const resource = await trx
    .insertInto('resources')
    .values({ blueprint_id: blueprint.id, capacity: blueprint.leases_per_resource, allocated_for_lease_id: leaseId, selector })
    .returning(['id', 'state'])
    .executeTakeFirstOrThrow();
  // The blueprint decided to make it (for whatever request `cause` serves): Slipway's decision, linked to its cause.
  const actor = { issuedBy: systemActorName('blueprint'), source: 'system' as const, requestId: cause.request_id };
  const target = { kind: 'resource', id: resource.id } as const;
  const { command } = await appendInTransaction(
    trx,
    { target, kind: 'allocate', causedBy: cause.id, actor: { ...actor, reason: why } },
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
