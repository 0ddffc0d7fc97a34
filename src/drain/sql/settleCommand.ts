import { type Compilable, type RawBuilder, sql } from 'kysely';
import type { CommandRow } from '../../../migrations/schema.ts';
import { eventRow, type EventInput } from '../../objects/recordEvent.ts';
import type { Outcome } from '../Handler.ts';

/**
 * What one applied command leaves behind, as ONE statement of the outcome
 * transaction: the object's update if it has one (a version-checked
 * UPDATE ... RETURNING *, whose row the statement returns), its event rows,
 * its own status (settled, or queued again until its retry time for a yield),
 * and the cancellation of the queued work it supersedes (`supersedes` empty
 * for none). Events keep their order (WITH ORDINALITY), so an object's log
 * reads in the order they happened; event data null and absent both store
 * NULL.
 *
 * When the update's version check matches no row the statement fails with
 * `conflict` (slipway_expect): it travels with its commit in one query, and
 * the failure keeps that commit from running.
 */
export function settleCommand<Row>(
  command: CommandRow,
  outcome: Outcome,
  events: readonly EventInput[],
  supersedes: readonly string[],
  objectUpdate: Compilable<Row> | undefined,
  conflict: { sqlstate: string; message: string },
): RawBuilder<Row> {
  const eventRows = events.map(eventRow);
  const settle =
    outcome.status === 'yield'
      ? sql`status = 'queued', message = ${outcome.message}, attempts = attempts + 1,
            not_before = now() + make_interval(secs => ${(outcome.retryInMs ?? 1000) / 1000})`
      : sql`status = ${outcome.status}, message = ${outcome.message}, finished_at = now(),
            started_at = coalesce(started_at, now())`;
  const result = objectUpdate
    ? sql`select u.* from (select slipway_expect(exists (select 1 from updated), ${conflict.sqlstate}, ${conflict.message})) as checked
          left join updated u on true`
    : sql`select * from updated`;
  return sql<Row>`
    with updated as (${objectUpdate ?? sql`select null where false`}),
    recorded as (
      insert into events (target_kind, target_id, command_id, type, from_state, to_state, message, actor, source, data)
      select e.doc->>'target_kind', (e.doc->>'target_id')::bigint, (e.doc->>'command_id')::bigint, e.doc->>'type',
             e.doc->>'from_state', e.doc->>'to_state', e.doc->>'message', e.doc->>'actor', e.doc->>'source',
             nullif(e.doc->'data', 'null'::jsonb)
      from jsonb_array_elements(${JSON.stringify(eventRows)}::jsonb) with ordinality as e(doc, n)
      order by e.n
    ),
    superseded as (
      update commands set status = 'cancelled', finished_at = now(),
                          message = ${`superseded by ${command.kind} (command ${command.id})`}
      where target_kind = ${command.target_kind} and target_id = ${command.target_id}
        and status = 'queued' and kind = any(${supersedes}::text[]) and id <> ${command.id}
    ),
    settled as (
      update commands set ${settle} where id = ${command.id}
    )
    ${result}
  `;
}
