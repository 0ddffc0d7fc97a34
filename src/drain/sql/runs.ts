import { CompiledQuery } from 'kysely';
import type { ObjectRef } from '../../db/objectTables.ts';
import { PREEMPTING } from '../commandDisposition.ts';

/**
 * The most commands of one object a step reads, and so the longest run it
 * may apply (see DrainLane). Enough to clear in one step what arrives at a
 * busy object while a step of its lane goes by; a run's decisions are made
 * one after another in the step's transaction, so a longer one would only
 * hold its row locks longer.
 */
export const RUN_LENGTH = 16;

/**
 * The next ready commands of each held object, up to RUN_LENGTH, in queue
 * order; an object with none is let go (its lock given back, its queue
 * looked at once more and a wake-up written for what is queued there):
 * slipway_drain_runs, src/db/functions/slipway_drain_runs.ts. The order of a
 * queue: a `running` command first (its holder died mid-command, so it is
 * repeated: driver calls are at least once), then the preempting kinds
 * (release, reclaim) ahead of older work, then the rest in order.
 * Preemption is about order only: a yielded release waits out its own
 * not-before like anything else.
 */
export function runsStatement(held: readonly ObjectRef[]): CompiledQuery {
  return CompiledQuery.raw('select * from slipway_drain_runs($1::text[], $2::bigint[], $3::text[], $4::int)', [
    held.map((o) => o.kind),
    held.map((o) => o.id),
    PREEMPTING,
    RUN_LENGTH,
  ]);
}
