import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CommandRejectedError, InvalidInputError, NotFoundError } from '../../src/domain/errors.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand, appendInTransaction } from '../../src/queue/appendCommand.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// No worker runs in this file: commands stay queued, so what append wrote
// can be inspected exactly.
const alice = { issuedBy: 'alice@host', source: 'cli', reason: 'done with it' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
const db = () => database.db;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 30 });
  await createBlueprint(db(), { name: 'pool', driver: 'simulated', maxResources: 3 }, alice);
});
afterAll(async () => database?.drop());

const newLease = async () => (await createLease(db(), { blueprint: 'pool', holder: 'alice' }, alice)).lease;
const count = async (table: 'commands' | 'events') =>
  (await db().selectFrom(table).select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n;
const wakeups = async () =>
  (await sql<{ key: string }>`select target_kind || ':' || target_id as key from drain_wakeups`.execute(db())).rows.map((r) => r.key);

describe('creating a lease', () => {
  test("writes the lease, its blueprint's need_resource, its creation event and the blueprint's wake-up together", async () => {
    const { lease, command } = await createLease(db(), { blueprint: 'pool', holder: 'alice' }, alice);
    // The lease asks its blueprint directly: nothing is queued on the lease itself.
    const onLease = await db().selectFrom('commands').select('id').where('target_kind', '=', 'lease').where('target_id', '=', lease.id).execute();
    expect(onLease).toEqual([]);
    const asked = await db().selectFrom('commands').selectAll().where('id', '=', command.id).executeTakeFirstOrThrow();
    expect(asked).toMatchObject({
      target_kind: 'blueprint',
      target_id: lease.blueprint_id,
      kind: 'need_resource',
      payload: { leaseId: lease.id },
      status: 'queued',
      issued_by: 'alice@host',
      source: 'cli',
    });
    const events = await db().selectFrom('events').selectAll().where('target_kind', '=', 'lease').where('target_id', '=', lease.id).execute();
    expect(events.map((e) => [e.type, e.to_state, e.actor, e.command_id])).toEqual([['created', 'pending', 'alice@host', command.id]]);
    expect(await wakeups()).toContain(`blueprint:${lease.blueprint_id}`);
  });

  test('sets the expiry on the database clock and keeps the term, the heartbeat and the labels', async () => {
    const { lease, command } = await createLease(
      db(),
      { blueprint: 'pool', holder: 'alice', expiresInMs: 3_600_000, heartbeatMs: 5_000, attributes: { ci: 'nightly' } },
      alice,
    );
    const { now } = (await sql<{ now: Date }>`select now() as now`.execute(db())).rows[0]!;
    const left = lease.expires_at!.getTime() - now.getTime();
    expect(left).toBeGreaterThan(3_500_000);
    expect(left).toBeLessThanOrEqual(3_600_000);
    expect(lease).toMatchObject({ blueprint_name: 'pool', state: 'pending', term_ms: 3_600_000, heartbeat_ms: 5_000, attributes: { ci: 'nightly' } });
    expect(lease.heartbeat_deadline).toBeNull();
    // The answer's command is its row as stored, times included.
    const stored = await db().selectFrom('commands').selectAll().where('id', '=', command.id).executeTakeFirstOrThrow();
    expect(command).toEqual(stored);
  });

  test('refuses a blueprint that takes no leases, naming its state, writing nothing', async () => {
    await createBlueprint(db(), { name: 'off', driver: 'simulated', maxResources: 1 }, alice);
    await sql`update blueprints set state = 'disabled' where name = 'off'`.execute(db());
    const before = await count('commands');
    const leases = await db().selectFrom('leases').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
    await expect(createLease(db(), { blueprint: 'off', holder: 'x' }, alice)).rejects.toThrow('blueprint off is disabled; it takes no new leases');
    expect(await count('commands')).toBe(before);
    expect(await db().selectFrom('leases').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).toEqual(leases);
  });

  test('refuses an unknown blueprint and bad input, writing nothing', async () => {
    const before = await count('commands');
    await expect(createLease(db(), { blueprint: 'nope', holder: 'x' }, alice)).rejects.toBeInstanceOf(NotFoundError);
    await expect(createLease(db(), { blueprint: 'pool', holder: '' }, alice)).rejects.toThrow(/holder/);
    await expect(createLease(db(), { blueprint: 'pool', holder: 'x', expiresAt: '2001-01-01T00:00:00Z' }, alice)).rejects.toThrow(
      /expiresAt: must be in the future/,
    );
    expect(await count('commands')).toBe(before);
  });
});

describe('appending a command', () => {
  test('records who, from where and why, and wakes the object in the same transaction', async () => {
    const lease = await newLease();
    const { command, coalesced } = await appendCommand(db(), {
      target: { kind: 'lease', id: lease.id },
      kind: 'release',
      actor: { ...alice, requestId: 'req-1' },
    });
    expect(coalesced).toBe(false);
    expect(command).toMatchObject({
      kind: 'release',
      version: 1,
      status: 'queued',
      issued_by: 'alice@host',
      source: 'cli',
      reason: 'done with it',
      request_id: 'req-1',
    });
  });

  test('a command whose transaction rolls back leaves neither the command nor its wake-up', async () => {
    const lease = await newLease();
    await sql`delete from drain_wakeups where target_kind = 'lease' and target_id = ${lease.id}`.execute(db());
    const before = await count('commands');
    await expect(
      db()
        .transaction()
        .execute(async (trx) => {
          await appendInTransaction(trx, { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: alice }, { fromOutside: true });
          throw new Error('caller changed its mind');
        }),
    ).rejects.toThrow('caller changed its mind');
    expect(await count('commands')).toBe(before);
    expect(await wakeups()).not.toContain(`lease:${lease.id}`);
  });

  test('an append never moves a wake-up later, leaves one already due unwritten, and moves a later one earlier', async () => {
    const lease = await newLease();
    // xmin: the transaction that wrote the row's current version.
    const wakeup = async () =>
      (
        await sql<{ run_at: Date; xmin: string }>`
          select run_at, xmin::text from drain_wakeups where target_kind = 'lease' and target_id = ${lease.id}`.execute(db())
      ).rows[0]!;
    const renew = () =>
      appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'renew', payload: { expiresInMs: 60_000 }, actor: alice });
    await renew();
    const due = await wakeup();
    expect(due).toBeDefined();
    await renew();
    expect(await wakeup()).toEqual(due);
    expect((await wakeups()).filter((k) => k === `lease:${lease.id}`)).toHaveLength(1);

    await sql`update drain_wakeups set run_at = now() + interval '1 hour' where target_kind = 'lease' and target_id = ${lease.id}`.execute(db());
    await renew();
    expect((await wakeup()).run_at.getTime()).toBeLessThan(Date.now() + 60_000);
  });

  test.each([
    [{ kind: 'explode' }, InvalidInputError, /unknown command kind "explode" for a lease; use one of: release/],
    [{ kind: 'allocate' }, InvalidInputError, /internal command/],
    [{ kind: 'release', payload: { force: true } }, InvalidInputError, /invalid release payload: payload: Unrecognized key/],
    [{ kind: 'release', version: 7 }, InvalidInputError, /release has no version 7; this Slipway handles versions 1/],
  ])('refuses %o with a message saying what would be right, writing nothing', async (request, type, message) => {
    const lease = await newLease();
    const before = await count('commands');
    const attempt = appendCommand(db(), { target: { kind: 'lease', id: lease.id }, actor: alice, ...request });
    await expect(attempt).rejects.toBeInstanceOf(type);
    await expect(attempt).rejects.toThrow(message);
    expect(await count('commands')).toBe(before);
  });

  test('refuses a command for an object that does not exist', async () => {
    await expect(appendCommand(db(), { target: { kind: 'lease', id: 999_999 }, kind: 'release', actor: alice })).rejects.toThrow(
      'lease 999999 does not exist',
    );
  });

  test('refuses a command the state table does not allow in the current state', async () => {
    const { rows } = await sql<{ id: number }>`
      insert into resources (blueprint_id, capacity, state) select id, 1, 'pending' from blueprints where name = 'pool' returning id
    `.execute(db());
    const attempt = appendCommand(db(), { target: { kind: 'resource', id: rows[0]!.id }, kind: 'reclaim', actor: alice });
    await expect(attempt).rejects.toBeInstanceOf(CommandRejectedError);
    await expect(attempt).rejects.toThrow(/resource \d+ is pending; reclaim is accepted only when it is active/);
  });

  test('a duplicate asked for sooner brings the one queued for later forward, with its wake-up; one asked for later leaves it', async () => {
    const lease = await newLease();
    const target = { kind: 'lease', id: lease.id } as const;
    const inAnHour = new Date(Date.now() + 3_600_000);
    const first = await appendCommand(db(), { target, kind: 'release', actor: alice, notBefore: inAnHour });
    const dueOf = async () =>
      (await db().selectFrom('commands').select('not_before').where('id', '=', first.command.id).executeTakeFirstOrThrow()).not_before.getTime();
    const later = await appendCommand(db(), { target, kind: 'release', actor: alice, notBefore: new Date(inAnHour.getTime() + 60_000) });
    expect(later.command.id).toBe(first.command.id);
    expect(await dueOf()).toBe(inAnHour.getTime());

    const before = Date.now();
    const now = await appendCommand(db(), { target, kind: 'release', actor: alice });
    expect(now.coalesced).toBe(true);
    expect(now.command.id).toBe(first.command.id);
    expect(await dueOf()).toBeLessThan(before + 60_000);
    const { rows } = await sql<{ run_at: Date }>`
      select run_at from drain_wakeups where target_kind = 'lease' and target_id = ${lease.id}
    `.execute(db());
    expect(rows[0]!.run_at.getTime()).toBeLessThan(before + 60_000);
  });

  test('a duplicate release returns the one already queued, recorded as coalesced with its own actor', async () => {
    const lease = await newLease();
    const target = { kind: 'lease', id: lease.id } as const;
    const first = await appendCommand(db(), { target, kind: 'release', actor: alice });
    const second = await appendCommand(db(), { target, kind: 'release', actor: { issuedBy: 'gc', source: 'gc', reason: 'expired' } });
    expect(second.coalesced).toBe(true);
    expect(second.command.id).toBe(first.command.id);
    expect(second.record).toMatchObject({ status: 'coalesced', coalesced_into: first.command.id, issued_by: 'gc', source: 'gc', reason: 'expired' });
    const queued = await db()
      .selectFrom('commands')
      .select('id')
      .where('target_id', '=', lease.id)
      .where('kind', '=', 'release')
      .where('status', '=', 'queued')
      .execute();
    expect(queued).toHaveLength(1);
  });

  test('forty concurrent releases of one lease queue one command, and all callers learn its id', async () => {
    const lease = await newLease();
    const sources = ['web', 'cli', 'api', 'gc', 'system'] as const;
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: { issuedBy: `u${i}`, source: sources[i % 5]! } }),
      ),
    );
    expect(new Set(results.map((r) => r.command.id)).size).toBe(1);
    expect(results.filter((r) => !r.coalesced)).toHaveLength(1);
    const rows = await db().selectFrom('commands').select('status').where('target_id', '=', lease.id).where('kind', '=', 'release').execute();
    expect(rows.filter((r) => r.status === 'queued')).toHaveLength(1);
    expect(rows.filter((r) => r.status === 'coalesced')).toHaveLength(39);
  });
});
