import { type Compilable, type RawBuilder, sql } from 'kysely';
import type { CommandRow } from '../../../migrations/schema.ts';
import { eventRow, type EventInput } from '../../objects/recordEvent.ts';
import type { Outcome } from '../Handler.ts';

/**
 * What one applied command leaves behind in the commands and events tables,
 * as one call of slipway_settle_command (migrations/0010_cached_plans.ts,
 * whose plans stay cached on the drain's connection): its event rows in
 * order, the cancellation of the queued work it supersedes (`supersedes`
 * empty for none), and its own status (settled, or queued again until its
 * retry time for a yield). Event data null and absent both store NULL.
 */
export function settleCommand(
  command: CommandRow,
  outcome: Outcome,
  events: readonly EventInput[],
  supersedes: readonly string[],
): RawBuilder<unknown> {
  return sql`select slipway_settle_command(
    ${command.id}, ${command.target_kind}, ${command.target_id}, ${outcome.status}, ${outcome.message},
    ${(outcome.retryInMs ?? 1000) / 1000}::float8, ${JSON.stringify(events.map(eventRow))}::jsonb,
    ${supersedes}::text[], ${`superseded by ${command.kind} (command ${command.id})`}
  )`;
}

/**
 * The object's version-checked UPDATE ... RETURNING * as a statement that
 * returns the row as it now is, or fails with `conflict` (slipway_expect)
 * when the version check matched no row: it travels with its commit in one
 * query, and the failure keeps that commit from running.
 */
export function updateObjectChecked<Row>(objectUpdate: Compilable<Row>, conflict: { sqlstate: string; message: string }): RawBuilder<Row> {
  return sql<Row>`
    with updated as (${objectUpdate})
    select u.* from (select slipway_expect(exists (select 1 from updated), ${conflict.sqlstate}, ${conflict.message})) as checked
    left join updated u on true
  `;
}
