import { type RawBuilder, sql } from 'kysely';
import type { CommandRow } from '../../../migrations/schema.ts';
import { eventRow, type EventInput } from '../../db/recordEvent.ts';
import type { Outcome } from '../Handler.ts';

/** What one applied command leaves behind: its outcome, its events in order, and the queued kinds it supersedes (empty for none). */
export interface Settlement {
  readonly command: CommandRow;
  readonly outcome: Outcome;
  readonly events: readonly EventInput[];
  readonly supersedes: readonly string[];
}

/**
 * What applied commands leave behind in the commands and events tables, as
 * one call of slipway_settle_commands (src/db/functions/slipway_settle_commands.ts,
 * whose plans stay cached on the drain's connection), for every command of
 * a step: their event rows in order, the
 * cancellation of the queued work each supersedes, and each one's status
 * (settled, or queued again until its retry time for a yield). Event data
 * null and absent both store NULL.
 */
export function settleCommands(settlements: readonly Settlement[]): RawBuilder<unknown> {
  const settles = settlements.map(({ command, outcome, supersedes }) => ({
    id: command.id,
    target_kind: command.target_kind,
    target_id: command.target_id,
    status: outcome.status,
    message: outcome.message,
    retry_secs: (outcome.retryInMs ?? 1000) / 1000,
    supersedes,
    supersede_message: `superseded by ${command.kind} (command ${command.id})`,
  }));
  const events = settlements.flatMap((s) => s.events.map(eventRow));
  return sql`select slipway_settle_commands(${JSON.stringify(settles)}::jsonb, ${JSON.stringify(events)}::jsonb)`;
}
