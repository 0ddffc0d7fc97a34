import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { OBJECT_COLUMN_TYPES } from '../../src/drain/sql/updateObjects.ts';
import { drainJobKey } from '../../src/db/objectTables.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database?.drop());

// The columns migrations/schema.ts declares, per table. Selecting each one by
// name through Kysely fails if the migration and the types disagree.
test('every table and column in migrations/schema.ts exists after migrating', async () => {
  const db = database.db;
  await db
    .selectFrom('blueprints')
    .select([
      'id',
      'name',
      'driver',
      'settings',
      'max_resources',
      'leases_per_resource',
      'state',
      'live_resources',
      'min_resources',
      'idle_timeout_ms',
      'version',
      'created_at',
      'updated_at',
    ])
    .execute();
  await db
    .selectFrom('resources')
    .select([
      'id',
      'blueprint_id',
      'state',
      'capacity',
      'used_slots',
      'allocated_for_lease_id',
      'attributes',
      'message',
      'idle_since',
      'version',
      'created_at',
      'updated_at',
    ])
    .execute();
  await db
    .selectFrom('leases')
    .select([
      'id',
      'blueprint_id',
      'holder',
      'state',
      'resource_id',
      'slot',
      'attributes',
      'expires_at',
      'term_ms',
      'heartbeat_ms',
      'heartbeat_deadline',
      'message',
      'version',
      'created_at',
      'updated_at',
    ])
    .execute();
  await db.selectFrom('resource_slots').select(['resource_id', 'slot', 'lease_id', 'granted_at']).execute();
  await db.selectFrom('blueprint_waiters').select(['lease_id', 'blueprint_id', 'since', 'created_at']).execute();
  await db
    .selectFrom('commands')
    .select([
      'id',
      'target_kind',
      'target_id',
      'kind',
      'version',
      'payload',
      'issued_by',
      'source',
      'reason',
      'request_id',
      'caused_by',
      'status',
      'message',
      'dedup_key',
      'coalesced_into',
      'not_before',
      'attempts',
      'created_at',
      'started_at',
      'finished_at',
      'client_address',
      'user_agent',
    ])
    .execute();
  await db
    .selectFrom('events')
    .select(['id', 'target_kind', 'target_id', 'command_id', 'type', 'from_state', 'to_state', 'message', 'actor', 'source', 'data', 'created_at'])
    .execute();
  await db.selectFrom('workers').select(['id', 'hostname', 'pid', 'handles', 'started_at', 'heartbeat_at', 'job_lockers', 'version']).execute();
  await db.selectFrom('gc_passes').select(['id', 'trigger', 'status', 'started_at', 'finished_at', 'report', 'message']).execute();
  await db
    .selectFrom('usage_samples')
    .select([
      'pass_id',
      'sampled_at',
      'last_command_id',
      'last_event_id',
      'commands_appended',
      'commands_failed',
      'leases_activated',
      'wait_p50_ms',
      'wait_p95_ms',
    ])
    .execute();
  await db
    .selectFrom('blueprint_usage_samples')
    .select(['pass_id', 'blueprint_id', 'leases', 'leases_waiting', 'resources', 'leases_activated', 'wait_p50_ms', 'wait_p95_ms'])
    .execute();
  await db
    .selectFrom('reservations')
    .select([
      'id',
      'blueprint_id',
      'slots',
      'starts_at',
      'ends_at',
      'team',
      'holders',
      'hand_back_after_ms',
      'created_by',
      'created_source',
      'reason',
      'created_at',
      'cancelled_at',
      'cancelled_by',
      'cancelled_source',
      'cancel_reason',
    ])
    .execute();
  await db.selectFrom('leases').select(['reservation_id', 'reservation_ends_at']).execute();
  await db.selectFrom('blueprints').select(['reserved_until']).execute();
  await db.selectFrom('simulated_effects').select(['operation', 'object_id', 'idempotency_key', 'calls', 'first_at', 'last_at']).execute();
  await db.selectFrom('static_pool_claims').select(['blueprint_id', 'entry', 'resource_id', 'definition', 'claimed_at']).execute();
  await db
    .selectFrom('command_callbacks')
    .select(['id', 'command_id', 'url', 'status', 'attempts', 'next_attempt_at', 'created_at', 'finished_at'])
    .execute();
  await db
    .selectFrom('callback_attempts')
    .select(['id', 'callback_id', 'attempt', 'started_at', 'finished_at', 'status_code', 'error', 'next_retry_at'])
    .execute();
  await db
    .selectFrom('api_tokens')
    .select(['id', 'name', 'role', 'secret_sha256', 'created_by', 'created_at', 'last_used_at', 'revoked_at'])
    .execute();
  await db
    .selectFrom('idempotency_keys')
    .select(['token_id', 'key', 'request_sha256', 'state', 'response_status', 'response_headers', 'response_body', 'created_at'])
    .execute();
  await db.selectFrom('web_sessions').select(['id_sha256', 'token_id', 'csrf_token', 'created_at', 'expires_at']).execute();
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from information_schema.tables where table_schema = 'graphile_worker'`.execute(
    db,
  );
  expect(rows[0]!.n).toBeGreaterThan(0);
});

test("the drain's batched updates cast each object column to its type in the migrated database", async () => {
  const { rows } = await sql<{ kind: string; column: string; type: string }>`
    select t.kind, a.attname as column, format_type(a.atttypid, a.atttypmod) as type
    from (values ('blueprint', 'blueprints'::regclass), ('resource', 'resources'::regclass), ('lease', 'leases'::regclass)) as t(kind, rel)
    join pg_attribute a on a.attrelid = t.rel and a.attnum > 0 and not a.attisdropped
  `.execute(database.db);
  const migrated: Record<string, Record<string, string>> = {};
  for (const r of rows) migrated[r.kind] = { ...migrated[r.kind], [r.column]: r.type };
  expect(OBJECT_COLUMN_TYPES).toEqual(migrated);
});

test('object lock keys are distinct per kind and id', async () => {
  const { rows } = await sql<{ a: string; b: string; c: string }>`
    select object_lock_key('lease', 7)::text as a, object_lock_key('resource', 7)::text as b, object_lock_key('lease', 8)::text as c
  `.execute(database.db);
  const { a, b, c } = rows[0]!;
  expect(new Set([a, b, c]).size).toBe(3);
});

test("an object's wake-up job key has the one documented form, in SQL and in TypeScript", async () => {
  const { rows } = await sql<{ key: string }>`select object_drain_job_key('resource', 12) as key`.execute(database.db);
  expect(rows[0]!.key).toBe('drain:resource:12');
  expect(drainJobKey({ kind: 'resource', id: 12 })).toBe(rows[0]!.key);
});
