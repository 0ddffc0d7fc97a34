import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Database } from '../../src/db/Database.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { setQuota, setTeam } from '../../src/objects/teams.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { drainByHand } from '../helpers/drainByHand.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';

const alice = { issuedBy: 'alice@host', source: 'cli', reason: 'test' } as const;
const WARM = 8;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
/** The drain's one connection: kept open, so the plans it caches at the start are the ones it uses at the end. */
let worker: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  // No ANALYZE but the test's own, so nothing replans the cached plans meanwhile.
  await sql`alter table commands set (autovacuum_enabled = false)`.execute(database.db);
  await sql`alter table events set (autovacuum_enabled = false)`.execute(database.db);
  worker = Database.fromUrl(database.url, testLog, { poolSize: 1, keepConnections: true });
});
afterAll(async () => {
  await worker?.close();
  await database?.drop();
});

/**
 * Sequential scans of `commands` so far, with every connection's counts
 * flushed first: a backend reports its table statistics at most once a
 * second otherwise, so the test's own earlier statements could be counted
 * in the drain's window.
 */
async function commandsSeqScans(): Promise<number> {
  for (const pool of [worker.pool, database.pool]) {
    const clients = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()));
    try {
      // A backend reports its statistics when it goes idle after this, before it answers.
      for (const client of clients) await client.query('select pg_stat_force_next_flush()');
    } finally {
      for (const client of clients) client.release();
    }
  }
  const { rows } = await sql<{ seq_scan: string }>`select seq_scan from pg_stat_user_tables where relname = 'commands'`.execute(database.db);
  return Number(rows[0]!.seq_scan);
}

/** Flushes every connection's statistics (as commandsSeqScans does) and answers the index entries read through commands_unsettled so far. */
async function unsettledIndexEntriesRead(): Promise<number> {
  await commandsSeqScans();
  const { rows } = await sql<{ idx_tup_read: string }>`
    select idx_tup_read from pg_stat_user_indexes where indexrelname = 'commands_unsettled'
  `.execute(database.db);
  return Number(rows[0]!.idx_tup_read);
}

test("the drain's foreign-key checks on commands use its index after commands grew from a fresh database's few rows", async () => {
  // A fresh database, analyzed early (as autovacuum does): commands is a page or two.
  const blueprint = await createBlueprint(
    database.db,
    { name: 'warm', driver: 'simulated', minResources: WARM, maxResources: WARM + 8, leasesPerResource: 1 },
    alice,
  );
  await appendCommand(database.db, { target: { kind: 'blueprint', id: blueprint.id }, kind: 'top_up', actor: alice });
  await sql`analyze commands`.execute(database.db);
  await sql`analyze events`.execute(database.db);
  // The drivers' calls and running marks query on the test's own pool: the drain's connection is all its lanes use.
  const drain = drainByHand(worker, 60_000, database.pool);
  // The blueprint makes its warm resources in one decision: each resource's first command and
  // event checked against commands (a foreign key) on the worker's connection, more than the
  // five times after which PostgreSQL keeps a plan.
  await drain.all();
  expect(await worker.db.selectFrom('resources').select('id').where('state', '=', 'active').execute()).toHaveLength(WARM);

  // commands grows as a service's history does.
  await sql`
    insert into commands (target_kind, target_id, kind, issued_by, source, status, finished_at)
    select 'blueprint', b.id, 'top_up', 'history', 'system', 'done', now() from blueprints b, generate_series(1, 5000)
  `.execute(database.db);
  const leases = [];
  for (let n = 0; n < WARM; n++) leases.push((await createLease(database.db, { blueprint: 'warm', holder: 'alice' }, alice)).lease.id);

  const before = await commandsSeqScans();
  // Each lease's decision, acquire and grant append follow-ups and events: a foreign-key check on commands each.
  await drain.all();
  const after = await commandsSeqScans();

  const states = await database.db.selectFrom('leases').select('state').where('id', 'in', leases).execute();
  expect(states.map((s) => s.state)).toEqual(leases.map(() => 'active'));
  expect(after - before).toBe(0);
});

test("a blueprint's reads of the acquires in flight probe their own index while a backlog waits, though the statistics were taken with none", async () => {
  const blueprint = await createBlueprint(
    database.db,
    { name: 'backlogged', driver: 'simulated', minResources: 2, maxResources: 2, leasesPerResource: 2 },
    alice,
  );
  // A quota at the blueprint: its decisions then count each team's leases, the acquires on their way included.
  await setTeam(database.db, { name: 'qa' }, alice);
  await setQuota(database.db, { team: 'qa', blueprint: 'backlogged', maxLeases: 100 }, alice);
  await appendCommand(database.db, { target: { kind: 'blueprint', id: blueprint.id }, kind: 'top_up', actor: alice });
  const drain = drainByHand(worker, 60_000, database.pool);
  await drain.all();
  // Statistics of a service that keeps up: nothing unsettled when they were taken.
  await sql`analyze commands`.execute(database.db);

  // Then a backlog: commands queued for later at other objects, unsettled all the while.
  const BACKLOG = 3000;
  await sql`
    insert into commands (target_kind, target_id, kind, issued_by, source, not_before)
    select 'blueprint', ${blueprint.id}, 'top_up', 'backlog', 'system', now() + interval '1 hour' from generate_series(1, ${BACKLOG})
  `.execute(database.db);

  const before = await unsettledIndexEntriesRead();
  const leases = [];
  for (let n = 0; n < 6; n++) leases.push((await createLease(database.db, { blueprint: 'backlogged', holder: 'alice', team: 'qa' }, alice)).lease.id);
  // Each request is decided with the free slots, the team's count and the lease's acquires in flight read; the last two wait.
  await drain.all();
  const read = (await unsettledIndexEntriesRead()) - before;

  const states = await database.db.selectFrom('leases').select('state').where('id', 'in', leases).orderBy('id').execute();
  expect(states.map((s) => s.state)).toEqual(['active', 'active', 'active', 'active', 'pending', 'pending']);
  // Through commands_unsettled, each of those reads would pass over the whole backlog.
  expect(read, 'entries of commands_unsettled read by the decisions').toBeLessThan(BACKLOG);
});
