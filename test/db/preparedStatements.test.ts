import { sql } from 'kysely';
import { afterAll, beforeAll, expect, onTestFinished, test } from 'vitest';
import { statesWith } from '../../src/domain/lifecycle.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { drainByHand } from '../helpers/drainByHand.ts';
import { sidePool } from '../helpers/sidePool.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';
import { statementName } from '../../src/db/preparedText.ts';
import { returnSlotsStatement } from '../../src/drain/sql/returnSlots.ts';
import { slotsLeftStatement } from '../../src/drain/sql/slotsLeft.ts';
import { EFFECT_JOIN_MS } from '../../src/drain/DrainLane.ts';

const alice = { issuedBy: 'alice@host', source: 'cli', reason: 'test' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;

// One connection, so every statement below runs on the connection that prepared the ones before.
beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 1 });
  await createBlueprint(database.db, { name: 'pool', driver: 'simulated', maxResources: 1, leasesPerResource: 100 }, alice);
});
afterAll(async () => database?.drop());

/** The names of the statements prepared on the connection whose text starts with `start`. */
const prepared = async (start: string) =>
  (
    await sql<{ name: string }>`select name from pg_prepared_statements where starts_with(statement, ${start}) order by name`.execute(database.db)
  ).rows.map((r) => r.name);
const APPEND = '/* prepared */ select f.part, f.object_state,';
const CREATE_LEASE = '/* prepared */\n    with b as (';

const newLease = async () => (await createLease(database.db, { blueprint: 'pool', holder: 'alice' }, alice)).lease;
const release = async (id: number) => appendCommand(database.db, { target: { kind: 'lease', id }, kind: 'release', actor: alice });

test('an append and a new lease from outside are each prepared once on their connection, then only executed', async () => {
  const first = await newLease();
  const firstRelease = await release(first.id);
  const names = { append: await prepared(APPEND), createLease: await prepared(CREATE_LEASE) };
  expect(names.append).toHaveLength(1);
  expect(names.createLease).toHaveLength(1);
  expect(names.append[0]).toMatch(/^slipway_named_[0-9a-f]{20}$/);

  const second = await newLease();
  const secondRelease = await release(second.id);
  expect({ append: await prepared(APPEND), createLease: await prepared(CREATE_LEASE) }).toEqual(names);
  expect(second).toMatchObject({ id: first.id + 1, state: 'pending', holder: 'alice', blueprint_name: 'pool' });
  expect(secondRelease.command).toMatchObject({ id: expect.any(Number), kind: 'release', status: 'queued', issued_by: 'alice@host', source: 'cli' });
  expect(secondRelease.command.id).toBeGreaterThan(firstRelease.command.id);
});

test('a migration while the process runs (columns added, the append function replaced) breaks neither prepared statement', async () => {
  await release((await newLease()).id);
  const before = { append: await prepared(APPEND), createLease: await prepared(CREATE_LEASE) };
  expect(before.append).toHaveLength(1);
  // As a later release's migrations might; the function replaced (as 0007, 0011 and 0021 did) makes PostgreSQL replan both statements.
  await sql`alter table commands add column added_later text`.execute(database.db);
  await sql`alter table leases add column added_later text`.execute(database.db);
  const definition = await sql<{ text: string }>`select pg_get_functiondef('slipway_append_command'::regproc) as text`.execute(database.db);
  await sql.raw(definition.rows[0]!.text).execute(database.db);
  try {
    // The same connection and statements, replanned: their result columns, each named, stay as they were.
    const lease = await newLease();
    const after = await release(lease.id);
    expect({ append: await prepared(APPEND), createLease: await prepared(CREATE_LEASE) }).toEqual(before);
    expect(lease).toMatchObject({ state: 'pending' });
    expect(lease).not.toHaveProperty('added_later');
    expect(after.command).toMatchObject({ kind: 'release', status: 'queued' });
    expect(after.command).not.toHaveProperty('added_later');
  } finally {
    await sql`alter table commands drop column added_later`.execute(database.db);
    await sql`alter table leases drop column added_later`.execute(database.db);
  }
});

test("the drain's own statements are planned once per connection, not at each step", async () => {
  // Releases of pending leases: no driver call, so the lane's connection (the pool's only one) is all a step uses.
  const drain = drainByHand(database);
  for (let n = 0; n < 8; n++) {
    const lease = await newLease();
    await release(lease.id);
    await drain.drain('lease', lease.id);
  }
  const { rows } = await sql<{ name: string; statement: string; generic_plans: string; custom_plans: string }>`
    select name, statement, generic_plans, custom_plans from pg_prepared_statements where from_sql order by name
  `.execute(database.db);
  const plans = rows.map((r) => ({ statement: r.statement.slice(0, 60), generic: Number(r.generic_plans), custom: Number(r.custom_plans) }));
  // The settlement, the claim and the next commands' read ran at every step (eight of them) …
  expect(plans.filter((p) => p.generic >= 8).length).toBeGreaterThanOrEqual(3);
  // … and none was planned for its values, not even the first five times (PostgreSQL's default).
  expect(plans.filter((p) => p.custom > 0)).toEqual([]);
  // A query of a handler, sent unnamed, keeps the defaults: SET LOCAL ended with the lane's transactions.
  const mode = await sql<{ plan_cache_mode: string }>`show plan_cache_mode`.execute(database.db);
  expect(mode.rows[0]!.plan_cache_mode).toBe('auto');
  const seqScans = await sql<{ enable_seqscan: string }>`show enable_seqscan`.execute(database.db);
  expect(seqScans.rows[0]!.enable_seqscan).toBe('on');
});

test("a request for a slot reads its lease, the free slots and the line's heads through statements prepared on the drain's connection", async () => {
  const drain = drainByHand(database);
  await newLease();
  const blueprint = await database.db.selectFrom('blueprints').select('id').where('name', '=', 'pool').executeTakeFirstOrThrow();
  expect(await drain.drain('blueprint', blueprint.id)).toBeGreaterThan(0);
  const { rows } = await sql<{ statement: string }>`
    select statement from pg_prepared_statements where not from_sql and starts_with(statement, '/* prepared */')
  `.execute(database.db);
  const reads = { lease: 'select "l"."id", "l"."state"', freeSlots: 'select "r"."id", "r"."labels"', heads: 'select "h".* from "teams"' };
  for (const text of Object.values(reads)) expect(rows.filter((r) => r.statement.includes(text))).toHaveLength(1);
  // Their constants are literals, so a partial index can serve a generic plan.
  expect(rows.find((r) => r.statement.includes(reads.lease))!.statement).toContain(`"c"."status" in ('queued', 'running')`);
  const granting = statesWith('resource', 'grantsSlots').map((state) => `'${state}'`);
  expect(rows.find((r) => r.statement.includes(reads.freeSlots))!.statement).toContain(`"r"."state" in (${granting.join(', ')})`);
});

test('the slots a step gives back, on several resources, are one statement, sent in the round trip that opens the step', async () => {
  // The drivers' calls and the marks of calls that outlive their step go through a pool of their own: the lanes hold the test pool's only connection.
  const side = sidePool(database.url, { max: 2 });
  onTestFinished(() => side.end());
  const drain = drainByHand(database, undefined, side);
  // Every grant's call outlives a step's join window, on any machine, so its command is marked running through
  // that pool; the releases' calls return at once, so the nine are decided in one step.
  const settings = { recordEffects: false, operationLatencyMs: { acquireLease: EFFECT_JOIN_MS + 30 } };
  await createBlueprint(database.db, { name: 'slots', driver: 'simulated', maxResources: 3, leasesPerResource: 3, settings }, alice);
  const leases = [];
  for (let n = 0; n < 9; n++) leases.push((await createLease(database.db, { blueprint: 'slots', holder: 'alice' }, alice)).lease);
  await drain.all();
  const ids = leases.map((l) => l.id);
  const held = await database.db.selectFrom('leases').select(['id', 'state', 'resource_id']).where('id', 'in', ids).execute();
  expect(held.map((l) => l.state)).toEqual(Array(9).fill('active'));
  const resources = [...new Set(held.map((l) => l.resource_id!))];
  expect(resources).toHaveLength(3);
  // The slots' return and the look at what it left, by the names a step's PREPARE and a decision's statement sent alone give them.
  const names = new Map(
    [
      ['return', returnSlotsStatement([]).sql],
      ['left', slotsLeftStatement([]).sql],
    ].flatMap(([what, text]) => [
      [statementName(text!), `${what} by the step`],
      [statementName(text!, 'slipway_named'), `${what} alone`],
    ]),
  );
  const statements = async () =>
    (
      await sql<{ name: string; executions: number }>`
        select name, generic_plans + custom_plans as executions from pg_prepared_statements where name = any(${[...names.keys()]})
      `.execute(database.db)
    ).rows.map((r) => [names.get(r.name)!, r.executions] as const);
  const before = new Map(await statements());

  // Every lease released in one step: each gives its slot back itself, three on each of three resources.
  for (const lease of leases) await release(lease.id);
  await drain.together(leases.map((l) => ({ kind: 'lease', id: l.id })));

  // Never sent alone by a decision, and run once, for the nine, in the step.
  const ran = (await statements()).map(([name, executions]) => [name, executions - (before.get(name) ?? 0)] as const);
  expect(Object.fromEntries(ran.filter(([, n]) => n > 0))).toEqual({ 'return by the step': 1, 'left by the step': 1 });
  const slots = await database.db.selectFrom('resource_slots').select('lease_id').where('resource_id', 'in', resources).execute();
  expect(slots).toEqual([]);
  // Each resource was emptied by the step, and asked once to count its slots: it then says it is idle.
  const counts = await database.db.selectFrom('commands').select('target_id').where('kind', '=', 'count_slots').orderBy('target_id').execute();
  expect(counts.map((c) => c.target_id)).toEqual([...resources].sort((a, b) => a - b));
  await drain.together(resources.map((id) => ({ kind: 'resource', id })));
  const rows = await database.db.selectFrom('resources').select(['used_slots', 'idle_since']).where('id', 'in', resources).execute();
  expect(rows.map((r) => r.used_slots)).toEqual([0, 0, 0]);
  expect(rows.every((r) => r.idle_since !== null)).toBe(true);
});
