import type { Migration } from 'kysely';
import * as core from './0001_core.ts';
import * as simulatedEffects from './0002_simulated_effects.ts';
import * as api from './0004_api.ts';

/** Every migration, in order. Names sort in the order they must run. */
export const migrations: Record<string, Migration> = {
  '0001_core': core,
  '0002_simulated_effects': simulatedEffects,
  '0004_api': api,
};
