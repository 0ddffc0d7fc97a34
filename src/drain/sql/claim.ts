import { CompiledQuery } from 'kysely';
import type { ObjectRef } from '../../db/objectTables.ts';
import { WAKE_CHANNEL } from '../../db/channels.ts';
import { PREEMPTING } from '../commandDisposition.ts';

/**
 * Takes up to `room` due wake-ups, those of `want` first (the objects the
 * drain's own commit just woke), locks their objects, and answers each one's
 * first ready command (slipway_drain_claim, src/db/functions/slipway_drain_claim.ts).
 * An object the drain already holds (`held`) only loses its wake-up: the
 * drain reads its queue again right after, in the same round trip. Due
 * wake-ups of `want` left for want of room are signalled to other workers.
 * `onlyWanted`: take no others (a drain of chosen objects, as tests run).
 * Run it in a transaction that commits asynchronously: losing a claim in a
 * crash only means the object is drained again.
 */
export function claimStatement(room: number, want: readonly ObjectRef[], held: readonly ObjectRef[], onlyWanted = false): CompiledQuery {
  return CompiledQuery.raw(
    'select * from slipway_drain_claim($1::int, $2::text[], $3::bigint[], $4::boolean, $5::text[], $6::bigint[], $7::text[], $8)',
    [room, want.map((o) => o.kind), want.map((o) => o.id), onlyWanted, held.map((o) => o.kind), held.map((o) => o.id), PREEMPTING, WAKE_CHANNEL],
  );
}
