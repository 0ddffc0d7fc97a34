import { CompiledQuery } from 'kysely';
import type { ObjectRef } from '../../queue/objectTables.ts';
import { PREEMPTING } from '../commandStep.ts';

/**
 * The next ready command of each held object; an object with none is let go
 * (its lock given back, its queue looked at once more and a wake-up written
 * for what is queued there): slipway_drain_heads, migrations/0015_one_drain.ts.
 * The order of a queue: a `running` command first (its holder died
 * mid-command, so it is repeated: driver calls are at least once), then the
 * preempting kinds (release, reclaim) ahead of older work, then the rest in
 * order. Preemption is about order only: a yielded release waits out its own
 * not-before like anything else.
 */
export function headsStatement(held: readonly ObjectRef[]): CompiledQuery {
  return CompiledQuery.raw('select * from slipway_drain_heads($1::text[], $2::bigint[], $3::text[])', [
    held.map((o) => o.kind),
    held.map((o) => o.id),
    PREEMPTING,
  ]);
}
