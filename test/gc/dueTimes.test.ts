import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { statesAccepting, statesWith } from '../../src/domain/lifecycle.ts';
import { DUE_STATES, PEEK, peekDueTimes } from '../../src/gc/dueTimes.ts';
import { appendDueWork } from '../../src/gc/dueWork.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import type { TestDatabase } from '../concurrency/support/testCluster.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

const operator = { issuedBy: 'tester', source: 'cli' } as const;
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 4 });
});
afterAll(async () => {
  await database?.drop();
});

test("the due-time SQL's state lists are the state table's, as the partial indexes' predicates need", () => {
  expect([...DUE_STATES.expirable].sort()).toEqual(['pending', 'acquired', 'active'].sort());
  expect(statesAccepting('lease', 'release').filter((s) => s !== 'broken')).toEqual([...DUE_STATES.expirable]);
  expect(statesWith('lease', 'isSettingUp')).toEqual([...DUE_STATES.settingUp]);
  expect(statesAccepting('resource', 'check')).toEqual([...DUE_STATES.checkable]);
});

test("a timekeeper's look reads indexes only, whatever the tables' sizes (each range of a partial index)", async () => {
  await database.db.transaction().execute(async (trx) => {
    // Sequential scans priced out: a plan that still has one could not use the index.
    await sql`set local enable_seqscan = off`.execute(trx);
    const { rows } = await sql<{ 'QUERY PLAN': string }>`explain ${PEEK}`.execute(trx);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).not.toMatch(/Seq Scan on (leases|resources)/);
    for (const index of ['leases_expiring', 'leases_heartbeat_due', 'leases_wait_due', 'resources_check_due']) expect(plan).toContain(index);
  });
});

test('the look says what is due now and how soon the next thing is; one batch asks for it, and the next look finds it under way', async () => {
  const db = database.db;
  const blueprint = await createBlueprint(db, { name: 'due', driver: 'simulated', maxResources: 1, leasesPerResource: 10 }, operator);
  expect(await peekDueTimes(db)).toEqual({ dueNow: false, nextDueInMs: null });
  const soon = await createLease(db, { blueprint: blueprint.name, holder: 'a', expiresInMs: 60_000 }, operator);
  const { nextDueInMs } = await peekDueTimes(db);
  expect(nextDueInMs).toBeGreaterThan(50_000);
  expect(nextDueInMs).toBeLessThanOrEqual(60_000);
  const past = await createLease(db, { blueprint: blueprint.name, holder: 'b', expiresInMs: 1000 }, operator);
  // Due in a second: the look says so, then says it is due.
  expect((await peekDueTimes(db)).nextDueInMs).toBeLessThanOrEqual(1000);
  await expect.poll(async () => (await peekDueTimes(db)).dueNow, { timeout: 30_000 }).toBe(true);
  const reports = await appendDueWork(db, ['leases', 'checks'], { limit: 10, waitForLock: false });
  expect(reports?.leases?.actions).toEqual([
    expect.objectContaining({ target: `lease:${past.lease.id}`, kind: 'release', reason: expect.stringMatching(/^expired: its expiry time /) }),
  ]);
  expect(reports?.checks).toEqual({ found: 0, actions: [], truncated: false });
  // Its release is on its way: not due again, and the next due time is still the other lease's.
  expect((await peekDueTimes(db)).dueNow).toBe(false);
  expect((await appendDueWork(db, ['leases'], { limit: 10, waitForLock: true }))?.leases?.found).toBe(0);
  expect(soon.lease.id).toBeGreaterThan(0);
});

test('while one holds the time-driven lock, another does not wait for it and asks for nothing', async () => {
  const db = database.db;
  const blueprint = await createBlueprint(db, { name: 'held', driver: 'simulated', maxResources: 1, leasesPerResource: 10 }, operator);
  const past = await createLease(db, { blueprint: blueprint.name, holder: 'c', expiresInMs: 1000 }, operator);
  await expect.poll(async () => (await peekDueTimes(db)).dueNow, { timeout: 30_000 }).toBe(true);
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const holder = db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(x'534c5444'::bigint)`.execute(trx);
    locked();
    await held;
  });
  try {
    await isLocked;
    expect(await appendDueWork(db, ['leases'], { limit: 10, waitForLock: false })).toBeUndefined();
  } finally {
    release();
    await holder;
  }
  const after = await appendDueWork(db, ['leases'], { limit: 10, waitForLock: false });
  expect(after?.leases?.actions.map((a) => a.target)).toEqual([`lease:${past.lease.id}`]);
});
