import type { Db } from '../src/db/Database.ts';
import type { Actor } from '../src/domain/Actor.ts';
import { createBlueprint } from '../src/objects/createBlueprint.ts';

export const BENCH_ACTOR: Actor = { issuedBy: 'bench', source: 'cli', reason: 'benchmark' };

/**
 * A blueprint on the `simulated` driver at zero latency and recording
 * nothing, so the figures measure Slipway and PostgreSQL rather than any
 * infrastructure: its calls do nothing, as the peer's driver's do.
 */
export async function createSimulatedBlueprint(
  db: Db,
  name: string,
  limits: { maxResources: number; leasesPerResource: number; minResources?: number },
): Promise<number> {
  const blueprint = await createBlueprint(
    db,
    { name, driver: 'simulated', settings: { latencyMs: { min: 0, max: 0 }, recordEffects: false }, ...limits },
    BENCH_ACTOR,
  );
  return blueprint.id;
}
