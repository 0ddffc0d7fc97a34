import type { Migration } from 'kysely';
import * as core from './0001_core.ts';
import * as simulatedEffects from './0002_simulated_effects.ts';
import * as fastPaths from './0003_fast_paths.ts';
import * as gc from './0005_gc.ts';
import * as callbacks from './0006_callbacks.ts';
import * as staticPoolClaims from './0007_static_pool_claims.ts';

/** Every migration, in order. Names sort in the order they must run. */
export const migrations: Record<string, Migration> = {
  '0001_core': core,
  '0002_simulated_effects': simulatedEffects,
  '0003_fast_paths': fastPaths,
  '0005_gc': gc,
  '0006_callbacks': callbacks,
  '0007_static_pool_claims': staticPoolClaims,
};
