import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { readState } from '../../src/metrics/scrape.ts';
import { updateBlueprint } from '../../src/objects/updateBlueprint.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { type DrainByHand, drainByHand } from '../helpers/drainByHand.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// A line longer than one read of it (64 rows) and than what a decision
// counts (100): the blueprint reads it from the head only while it has room,
// so a decision that serves nobody reads none of it. Drained by hand, so
// each decision can be looked at.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let drain: DrainByHand;
const db = () => database.db;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 6 });
  drain = drainByHand(database);
});
afterAll(async () => database?.drop());

const statesOf = async (ids: readonly number[]) =>
  (await db().selectFrom('leases').select('state').where('id', 'in', ids).execute()).map((l) => l.state);
const lineLength = async () => (await db().selectFrom('blueprint_waiters').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n;

test('a long line is served from its head in order, past more than a page of leases that left it, and counted only as far as it was read', async () => {
  const blueprint = await createBlueprint(
    db(),
    { name: 'long', driver: 'simulated', maxResources: 1, leasesPerResource: 1, settings: { latencyMs: { min: 0, max: 0 } } },
    alice,
  );
  const holder = (await createLease(db(), { blueprint: 'long', holder: 'first' }, alice)).lease;
  await drain.all();
  expect(await statesOf([holder.id])).toEqual(['active']);

  const waiters: number[] = [];
  for (let i = 0; i < 150; i++) waiters.push((await createLease(db(), { blueprint: 'long', holder: `waiter ${i}` }, alice)).lease.id);
  await drain.all();
  expect(await lineLength()).toBe(150);
  // Each joined with no room: its place counted exactly up to 100, beyond that as "100 or more".
  const waiting = await db()
    .selectFrom('events')
    .select(['message', sql<number>`(data->>'leaseId')::int`.as('leaseId')])
    .where('target_kind', '=', 'blueprint')
    .where('target_id', '=', blueprint.id)
    .where('type', '=', 'lease_waiting')
    .orderBy('id')
    .execute();
  expect(waiting.map((e) => e.leaseId)).toEqual(waiters);
  const ahead = waiting.map((e) => /; (\d+( or more)?) waiting ahead$/.exec(e.message)?.[1]);
  expect(ahead).toEqual(waiters.map((_, k) => (k <= 100 ? String(k) : '100 or more')));

  // The first 70 give up. Nobody is served, so the blueprint does not read
  // the line: their rows stay until a serving reaches them.
  for (const id of waiters.slice(0, 70)) await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: alice });
  await drain.all();
  expect(new Set(await statesOf(waiters.slice(0, 70)))).toEqual(new Set(['destroyed']));
  expect(await lineLength()).toBe(150);
  // Yet the metrics count only the leases that still wait.
  const gauges = await readState(db(), { staleAfterMs: 60_000, heartbeatMs: 10_000 });
  expect(gauges.waitingLeases).toEqual([{ blueprint: 'long', count: 80 }]);

  // A lease released before its blueprint decided on it: the decision
  // changes neither the line nor the room, so it does not serve the line.
  const { lease: late, command: asked } = await createLease(db(), { blueprint: 'long', holder: 'late' }, alice);
  await appendCommand(db(), { target: { kind: 'lease', id: late.id }, kind: 'release', actor: alice });
  await drain.drain('lease', late.id);
  await drain.all();
  const decided = await db().selectFrom('commands').select(['status', 'message']).where('id', '=', asked.id).executeTakeFirstOrThrow();
  expect(decided).toEqual({ status: 'done', message: `lease ${late.id} no longer needs capacity` });
  expect(await lineLength()).toBe(150);

  // Room for ten: the ten oldest leases still waiting get it, read past the
  // 70 rows of those that left (more than a page), which go.
  await db()
    .transaction()
    .execute((trx) => updateBlueprint(trx, blueprint.id, { maxResources: 11 }, alice));
  await drain.all();
  expect(new Set(await statesOf(waiters.slice(70, 80)))).toEqual(new Set(['active']));
  expect(new Set(await statesOf(waiters.slice(80)))).toEqual(new Set(['pending']));
  expect(await lineLength()).toBe(70);
  const served = await db()
    .selectFrom('commands')
    .select('message')
    .where('target_kind', '=', 'blueprint')
    .where('target_id', '=', blueprint.id)
    .where('kind', '=', 'serve_waiters')
    .executeTakeFirstOrThrow();
  // Two pages read: 64 rows, then 64 more, of which the last 48 still wait.
  expect(served.message).toMatch(/; 48 or more lease\(s\) wait \(at its limit; 11 of 11 live, no free slot\)$/);
  for (const id of waiters.slice(70, 80)) expect(served.message).toContain(`for lease ${id} `);
});
