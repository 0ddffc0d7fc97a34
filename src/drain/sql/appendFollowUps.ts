import { CompiledQuery } from 'kysely';
import type { ValidatedAppend } from '../../queue/appendCommand.ts';
import type { ObjectRef } from '../../db/objectTables.ts';

/** One follow-up as the step's commit appends it: validated, with the command that caused it and what to say if its target is gone. */
export interface FollowUpAppend extends ValidatedAppend {
  readonly target: ObjectRef;
  readonly kind: string;
  readonly causedBy: number;
  readonly issuedBy: string;
  readonly reason: string;
  readonly requestId: string | null;
  readonly notBefore: Date | null;
  /** The error's message when the target does not exist (SW002: a follow-up to nothing is a bug). */
  readonly missing: string;
}

/**
 * Every follow-up of a step in one statement: slipway_append_command for
 * each, in order (a lateral call per row of the arrays, which PostgreSQL
 * makes in the arrays' order), as `system` and without a wake-up (the
 * commit wakes their objects together, in key order: see commitOutcome).
 * A target that does not exist fails the statement, and the commit with it:
 * the append itself looks up its target only to check a state, which a
 * message between objects never asks for (its receiver decides what it
 * means in its state), so the lookup is made here: a scalar subquery per
 * target, an index probe. As `exists (…)` PostgreSQL could hash the whole
 * table's index for it instead, once per step, a cost that grows with
 * the table where the probes' does not.
 */
export function appendFollowUpsStatement(followUps: readonly FollowUpAppend[], missingSqlState: string): CompiledQuery {
  const column = <T>(value: (f: FollowUpAppend) => T) => followUps.map(value);
  return CompiledQuery.raw(
    `select slipway_expect(t.found, '${missingSqlState}', u.missing)
     from unnest($1::text[], $2::bigint[], $3::text[], $4::int[], $5::jsonb[], $6::text[], $7::text[],
                 $8::text[], $9::bigint[], $10::text[], $11::timestamptz[], $12::text[])
       as u(target_kind, target_id, kind, version, payload, issued_by, reason, request_id, caused_by, dedup_key, not_before, missing)
     cross join lateral (select coalesce(case u.target_kind
       when 'lease' then (select true from leases o where o.id = u.target_id)
       when 'resource' then (select true from resources o where o.id = u.target_id)
       else (select true from blueprints o where o.id = u.target_id) end, false) as found) as t
     cross join lateral slipway_append_command(
       u.target_kind, u.target_id, null, u.kind, u.version, u.payload, u.issued_by, 'system', u.reason, u.request_id,
       null, null, u.caused_by, u.dedup_key, u.not_before, null) as f`,
    [
      column((f) => f.target.kind),
      column((f) => f.target.id),
      column((f) => f.kind),
      column((f) => f.version),
      column((f) => JSON.stringify(f.payload)),
      column((f) => f.issuedBy),
      column((f) => f.reason),
      column((f) => f.requestId),
      column((f) => f.causedBy),
      column((f) => f.dedupKey),
      column((f) => f.notBefore),
      column((f) => f.missing),
    ],
  );
}
