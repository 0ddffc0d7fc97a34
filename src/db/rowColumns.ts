import { type RawBuilder, sql } from 'kysely';
import type { CommandRow, LeaseRow } from '../../migrations/schema.ts';

/**
 * The columns of rows that prepared statements answer with, each named.
 * A prepared statement's result columns must not change under it: with
 * `*` (or `(row).*`), a column a migration adds while a process runs would
 * fail the statement when PostgreSQL replans it. `satisfies` makes a column
 * the generated types gain, or lose, a compile error here.
 */
const COMMAND_COLUMNS = Object.keys({
  id: true,
  target_kind: true,
  target_id: true,
  kind: true,
  version: true,
  payload: true,
  issued_by: true,
  source: true,
  reason: true,
  request_id: true,
  caused_by: true,
  status: true,
  message: true,
  dedup_key: true,
  coalesced_into: true,
  not_before: true,
  attempts: true,
  created_at: true,
  started_at: true,
  finished_at: true,
  client_address: true,
  user_agent: true,
} satisfies Record<keyof CommandRow, true>);

const LEASE_COLUMNS = Object.keys({
  id: true,
  blueprint_id: true,
  holder: true,
  state: true,
  resource_id: true,
  slot: true,
  attributes: true,
  expires_at: true,
  term_ms: true,
  heartbeat_ms: true,
  heartbeat_deadline: true,
  wait_deadline: true,
  priority: true,
  team: true,
  selector: true,
  callback_url: true,
  granted_at: true,
  end_by: true,
  end_notice_at: true,
  ending: true,
  preemptible: true,
  reservation_id: true,
  reservation_ends_at: true,
  message: true,
  version: true,
  created_at: true,
  updated_at: true,
} satisfies Record<keyof LeaseRow, true>);

const named = (columns: readonly string[], row: string) => columns.map((column) => `${row}.${column}`).join(', ');

/** A command row's columns of the composite or relation `row` (`(f.cmd)`, `c`), as SQL text. */
export const commandColumnsText = (row: string): string => named(COMMAND_COLUMNS, row);

/** A lease row's columns of the relation `row`. */
export const leaseColumns = (row: string): RawBuilder<unknown> => sql.raw(named(LEASE_COLUMNS, row));
