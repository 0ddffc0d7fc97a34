import { z } from 'zod';
import type { ObjectKind } from '../../migrations/schema.ts';
import { LIFECYCLES, liveStates } from '../domain/lifecycle.ts';

/** The state filter of a list that means "every state an object may still leave" (see liveStates). */
export const LIVE = 'live';

/** A list's state filter for `kind`: one of its states, or `live`. */
export const stateFilterOf = (kind: ObjectKind) => z.enum([LIVE, ...Object.keys(LIFECYCLES[kind])]);

/** The states a list's state filter lets through. */
export function statesMatching(kind: ObjectKind, filter: string): string[] {
  return filter === LIVE ? liveStates(kind) : [filter];
}
