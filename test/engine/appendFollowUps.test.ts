import { afterAll, beforeAll, expect, test } from 'vitest';
import { validatedAppend } from '../../src/queue/appendCommand.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendFollowUpsStatement, type FollowUpAppend } from '../../src/drain/sql/appendFollowUps.ts';
import type { ObjectRef } from '../../src/db/objectTables.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// A step's follow-ups go out as one statement: they must be appended in the
// order the step decided them (a queue is served in id order), coalesce as
// one append at a time would, and a follow-up to nothing must fail it all.
let database: Awaited<ReturnType<typeof createTestDatabase>>;
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
let leaseIds: number[];
let blueprintId: number;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 4 });
  blueprintId = (await createBlueprint(database.db, { name: 'pool', driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, alice)).id;
  leaseIds = [];
  for (let i = 0; i < 3; i++) leaseIds.push((await createLease(database.db, { blueprint: 'pool', holder: 'alice' }, alice)).lease.id);
});
afterAll(async () => database?.drop());

const followUp = (target: ObjectRef, kind: string, payload: unknown, reason: string): FollowUpAppend => ({
  ...validatedAppend({ target, kind, payload, actor: { issuedBy: 'alice@host', source: 'system' } }, { fromOutside: false }),
  target,
  kind,
  causedBy: 1,
  issuedBy: 'alice@host',
  reason,
  requestId: null,
  notBefore: null,
  missing: `${kind} to ${target.kind} ${target.id}: it does not exist`,
});

const send = (followUps: FollowUpAppend[]) => {
  const statement = appendFollowUpsStatement(followUps, 'SW002');
  return database.pool.query(statement.sql, [...statement.parameters]);
};

test('follow-ups are appended in the order given, each with its own payload, reason and cause; a duplicate coalesces into the one before', async () => {
  const blueprint = { kind: 'blueprint', id: blueprintId } as const;
  const asked = [
    followUp(blueprint, 'need_resource', { leaseId: leaseIds[2] }, 'third lease'),
    followUp({ kind: 'lease', id: leaseIds[0]! }, 'destroy', undefined, 'first lease'),
    followUp(blueprint, 'need_resource', { leaseId: leaseIds[1] }, 'second lease'),
    followUp({ kind: 'lease', id: leaseIds[0]! }, 'destroy', undefined, 'first lease again'),
  ];
  await send(asked);
  const made = await database.db
    .selectFrom('commands')
    .select(['id', 'target_kind', 'target_id', 'kind', 'payload', 'reason', 'caused_by', 'source', 'status', 'coalesced_into'])
    .where('caused_by', '=', 1)
    .orderBy('id')
    .execute();
  expect(made.map((c) => c.reason)).toEqual(['third lease', 'first lease', 'second lease', 'first lease again']);
  expect(made.map((c) => (c.payload as { leaseId?: number }).leaseId ?? null)).toEqual([leaseIds[2], null, leaseIds[1], null]);
  expect(made.every((c) => c.source === 'system')).toBe(true);
  // destroy has a dedup key: the second joined the first, still queued.
  expect(made[3]).toMatchObject({ status: 'coalesced', coalesced_into: made[1]!.id });
});

test('a follow-up to an object that does not exist fails the whole statement with SW002, and appends none of them', async () => {
  const before = await database.db.selectFrom('commands').select('id').execute();
  const asked = [
    followUp({ kind: 'lease', id: leaseIds[1]! }, 'destroy', undefined, 'exists'),
    followUp({ kind: 'lease', id: 999_999 }, 'destroy', undefined, 'gone'),
  ];
  await expect(send(asked)).rejects.toMatchObject({ code: 'SW002', message: 'destroy to lease 999999: it does not exist' });
  expect(await database.db.selectFrom('commands').select('id').execute()).toHaveLength(before.length);
});
