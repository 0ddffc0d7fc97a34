import type { ApiTestEnv } from '../../api/support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from '../../api/support/fixtures.ts';

/** A lease held by the operator token, active on a fresh simulated blueprint, with the resource it is on. */
export async function operatorLease(
  env: ApiTestEnv,
  settings: Record<string, unknown> = {},
): Promise<{ id: number; blueprint: string; resourceId: number }> {
  const blueprint = await simulatedBlueprint(env.as.admin, settings);
  const lease = await activeLease(env.as.operator, blueprint.name);
  return { id: lease.id, blueprint: blueprint.name, resourceId: lease.resourceId };
}

/** The release commands on a lease, oldest first, coalesced ones included. */
export async function releaseCommands(env: ApiTestEnv, leaseId: number) {
  return env.database.db
    .selectFrom('commands')
    .select(['id', 'status', 'coalesced_into', 'source', 'issued_by', 'reason'])
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', leaseId)
    .where('kind', '=', 'release')
    .orderBy('id')
    .execute();
}
