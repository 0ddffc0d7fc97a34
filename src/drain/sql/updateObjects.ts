import { CompiledQuery } from 'kysely';
import type { BlueprintsTable, LeasesTable, ObjectKind, ResourcesTable } from '../../../migrations/schema.ts';
import { OBJECT_TABLE } from '../../db/objectTables.ts';

/**
 * Each object table's columns as PostgreSQL types them: the element type of
 * the array each column's new values travel in. Complete by `satisfies`
 * (a column added to migrations/schema.ts must be added here), and checked
 * against the migrated database by test/db/schema.test.ts.
 */
const COLUMN_TYPES = {
  blueprint: {
    id: 'bigint',
    name: 'text',
    driver: 'text',
    settings: 'jsonb',
    max_resources: 'integer',
    leases_per_resource: 'integer',
    state: 'text',
    live_resources: 'integer',
    min_resources: 'integer',
    idle_timeout_ms: 'bigint',
    check_interval_ms: 'bigint',
    clean_between_leases: 'boolean',
    clean_attempts: 'integer',
    priority_step_ms: 'bigint',
    fair_share_half_life_ms: 'bigint',
    labels: 'jsonb',
    orphans: 'text',
    possible_labels: 'jsonb',
    max_hold_ms: 'bigint',
    preemption: 'jsonb',
    reserved_until: 'timestamp with time zone',
    version: 'integer',
    created_at: 'timestamp with time zone',
    updated_at: 'timestamp with time zone',
  } satisfies Record<keyof BlueprintsTable, string>,
  resource: {
    id: 'bigint',
    blueprint_id: 'bigint',
    state: 'text',
    capacity: 'integer',
    used_slots: 'integer',
    allocated_for_lease_id: 'bigint',
    attributes: 'jsonb',
    labels: 'jsonb',
    selector: 'text',
    message: 'text',
    idle_since: 'timestamp with time zone',
    health: 'text',
    health_message: 'text',
    checked_at: 'timestamp with time zone',
    version: 'integer',
    created_at: 'timestamp with time zone',
    updated_at: 'timestamp with time zone',
  } satisfies Record<keyof ResourcesTable, string>,
  lease: {
    id: 'bigint',
    blueprint_id: 'bigint',
    holder: 'text',
    state: 'text',
    resource_id: 'bigint',
    slot: 'integer',
    attributes: 'jsonb',
    expires_at: 'timestamp with time zone',
    term_ms: 'bigint',
    heartbeat_ms: 'integer',
    heartbeat_deadline: 'timestamp with time zone',
    wait_deadline: 'timestamp with time zone',
    priority: 'smallint',
    team: 'text',
    selector: 'text',
    callback_url: 'text',
    granted_at: 'timestamp with time zone',
    end_by: 'timestamp with time zone',
    end_notice_at: 'timestamp with time zone',
    ending: 'jsonb',
    preemptible: 'boolean',
    reservation_id: 'bigint',
    reservation_ends_at: 'timestamp with time zone',
    message: 'text',
    version: 'integer',
    created_at: 'timestamp with time zone',
    updated_at: 'timestamp with time zone',
  } satisfies Record<keyof LeasesTable, string>,
} as const;

/** The column types the drain's batched updates cast to, for the schema test to compare with the database's. */
export const OBJECT_COLUMN_TYPES: { readonly [K in ObjectKind]: Readonly<Record<string, string>> } = COLUMN_TYPES;

/** One object's new row: the columns its step's outcomes set, and its version after them. */
export interface ObjectUpdate {
  readonly id: number;
  readonly version: number;
  readonly values: Readonly<Record<string, unknown>>;
}

/**
 * One update of every object of a kind whose outcomes set the same
 * columns, returning the rows as they now are (in no particular order).
 *
 * Why one statement, not one per object: each statement of a step costs the
 * server its own execution (the executor opening the table and its nine
 * indexes, a parse of the EXECUTE), and a step of 25 releases updates 25
 * leases; per lease, that start-up cost more than the update itself (see
 * docs/internals.md, where the time goes). The values travel as one typed
 * array per column (`unnest`), each written as node-postgres writes a
 * parameter (a JSON column's value is its JSON text).
 */
export function updateObjectsStatement(kind: ObjectKind, columns: readonly string[], updates: readonly ObjectUpdate[]): CompiledQuery {
  const types: Readonly<Record<string, string>> = COLUMN_TYPES[kind];
  for (const column of columns) {
    if (column === 'id' || column === 'version' || column === 'updated_at' || types[column] === undefined) {
      throw new Error(`${kind} outcome sets a column it may not: ${JSON.stringify(column)}`);
    }
  }
  const table = OBJECT_TABLE[kind];
  const arrays = [`$1::bigint[]`, `$2::integer[]`, ...columns.map((column, i) => `$${i + 3}::${types[column]}[]`)];
  const names = ['id', 'version', ...columns.map((column) => `"${column}"`)];
  const assignments = [...columns.map((column) => `"${column}" = u."${column}"`), 'version = u.version', 'updated_at = now()'];
  return CompiledQuery.raw(
    `update ${table} o set ${assignments.join(', ')}
     from unnest(${arrays.join(', ')}) as u(${names.join(', ')})
     where o.id = u.id
     returning o.*`,
    [updates.map((u) => u.id), updates.map((u) => u.version), ...columns.map((column) => updates.map((u) => u.values[column] ?? null))],
  );
}
