import { sql } from 'kysely';
import { describe, expect, test } from 'vitest';
import type { ObjectKind } from '../../migrations/schema.ts';
import { handDrainedDatabase } from '../helpers/drainByHand.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { readBlueprintDetail } from '../../src/read/blueprints.ts';
import { appendCommand, appendInTransaction } from '../../src/queue/appendCommand.ts';
import { commandNotice, noticesStatement } from '../../src/queue/announcements.ts';
import { simpleQueryText } from '../../src/db/preparedText.ts';
import { COMMANDS_CHANNEL } from '../../src/db/channels.ts';
import { commandsOf, stateEvents } from '../helpers/objectHistory.ts';
import { waitFor } from '../helpers/waitFor.ts';

// The drain run by hand, one object at a time, with no graphile-worker: each
// step of the protocol can be looked at exactly.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { database, drain, db } = handDrainedDatabase({ poolSize: 10 });

/** Drains every object with a ready command until none is left (yielded commands wait). */
async function drainAll(): Promise<void> {
  for (let round = 0; round < 200; round++) {
    const { rows } = await sql<{ kind: ObjectKind; id: number }>`
      select distinct target_kind as kind, target_id as id from commands
      where status in ('queued', 'running') and not_before <= now()
    `.execute(db());
    if (rows.length === 0) return;
    for (const { kind, id } of rows) await drain().drain(kind, id);
  }
  throw new Error('the queues never emptied');
}

/** The lease's state events into `states`, in order, with the command each was made by. */
const transitionsTo = (leaseId: number, states: string[]) =>
  db()
    .selectFrom('events')
    .select(['to_state', 'command_id'])
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', leaseId)
    .where('to_state', 'in', states)
    .orderBy('id')
    .execute();

const lease = (id: number) => db().selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const releaseEffects = async (leaseId: number) =>
  (
    await sql<{ n: number }>`select count(*)::int as n from simulated_effects where operation = 'releaseLease' and object_id = ${leaseId}`.execute(
      db(),
    )
  ).rows[0]!.n;

async function blueprint(name: string, settings: Record<string, unknown> = {}, maxResources = 2) {
  return createBlueprint(db(), { name, driver: 'simulated', settings, maxResources, leasesPerResource: 1 }, alice);
}

/**
 * A pending lease and the resource its blueprint made for it, whose
 * allocation will fail for good; the resource's queue not yet drained.
 */
async function leaseWithResourceToBreak(name: string) {
  const b = await blueprint(name, { permanentFailureRate: 1, failOperations: ['allocateResource'] });
  const { lease: l } = await createLease(db(), { blueprint: name, holder: 'alice' }, alice);
  await drain().drain('lease', l.id);
  await drain().drain('blueprint', b.id);
  const made = await db().selectFrom('resources').select('id').where('allocated_for_lease_id', '=', l.id).executeTakeFirstOrThrow();
  return { b, l, made };
}

describe('the drain', () => {
  test('takes a lease through its whole life, each transition once, with follow-ups linked to their cause', async () => {
    await blueprint('life');
    const { lease: l } = await createLease(db(), { blueprint: 'life', holder: 'alice' }, alice);
    await drainAll();
    expect((await lease(l.id)).state).toBe('active');
    const { command: release } = await appendCommand(db(), { target: { kind: 'lease', id: l.id }, kind: 'release', actor: alice });
    await drainAll();
    expect(await stateEvents(db(), 'lease', l.id)).toEqual(['pending→acquired', 'acquired→active', 'active→released', 'released→destroyed']);
    // The grant acquires and activates in one command (decision 0025): both transitions are its, and no activate is queued.
    const grant = (await commandsOf(db(), 'lease', l.id)).find((c) => c.kind === 'grant')!;
    expect(grant).toMatchObject({ status: 'done', message: expect.stringMatching(/^acquired slot 0 of resource \d+; active$/) });
    expect(await transitionsTo(l.id, ['acquired', 'active'])).toEqual([
      { to_state: 'acquired', command_id: grant.id },
      { to_state: 'active', command_id: grant.id },
    ]);
    expect((await commandsOf(db(), 'lease', l.id)).map((c) => c.kind)).not.toContain('activate');
    // The release itself takes the lease through released to destroyed: both transitions are its, and no destroy is queued.
    expect(await transitionsTo(l.id, ['released', 'destroyed'])).toEqual([
      { to_state: 'released', command_id: release.id },
      { to_state: 'destroyed', command_id: release.id },
    ]);
    expect((await commandsOf(db(), 'lease', l.id)).map((c) => c.kind)).not.toContain('destroy');
    // It gave its slot back itself: the row is gone, the resource's timeline
    // says so with the release as its cause, and the resource, whose last
    // slot it was, was told only to count them (no release_slot).
    const resourceId = (await lease(l.id)).resource_id!;
    expect(await db().selectFrom('resource_slots').select('slot').where('resource_id', '=', resourceId).execute()).toEqual([]);
    const freed = await db()
      .selectFrom('events')
      .select(['command_id', 'actor', 'data'])
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resourceId)
      .where('type', '=', 'slot_freed')
      .execute();
    expect(freed).toEqual([{ command_id: release.id, actor: 'alice@host', data: { leaseId: l.id, slot: 0 } }]);
    const caused = await db().selectFrom('commands').selectAll().where('caused_by', '=', release.id).execute();
    expect(caused).toEqual([
      expect.objectContaining({
        target_kind: 'resource',
        target_id: resourceId,
        kind: 'count_slots',
        status: 'done',
        issued_by: 'system:lease',
        source: 'system',
      }),
    ]);
    const resource = await db().selectFrom('resources').selectAll().where('id', '=', resourceId).executeTakeFirstOrThrow();
    expect(resource).toMatchObject({ state: 'active', used_slots: 0 });
    expect(resource.idle_since).not.toBeNull();
    expect(await releaseEffects(l.id)).toBe(1);
  });

  test('a slow driver call holds up only its own object: the rest of its batch goes on while it is in flight', async () => {
    // Far longer than the fast lease's whole release takes, so the order is not a race.
    await blueprint('slow-release', { operationLatencyMs: { releaseLease: 8000 } });
    // Recording nothing, its call is over within a tick: it cannot outlive the join window.
    await blueprint('fast-release', { recordEffects: false });
    const { lease: slow } = await createLease(db(), { blueprint: 'slow-release', holder: 'alice' }, alice);
    const { lease: fast } = await createLease(db(), { blueprint: 'fast-release', holder: 'alice' }, alice);
    await drainAll();
    expect([(await lease(slow.id)).state, (await lease(fast.id)).state]).toEqual(['active', 'active']);
    const { command: slowRelease } = await appendCommand(db(), { target: { kind: 'lease', id: slow.id }, kind: 'release', actor: alice });
    await appendCommand(db(), { target: { kind: 'lease', id: fast.id }, kind: 'release', actor: alice });

    // One lane takes both (and the resources their follow-ups wake).
    const lane = drain().all();
    // The slow call's running mark is a hint sent beside the step's commit, so it may land just after the fast lease is destroyed.
    const slowStatus = async () =>
      (await db().selectFrom('commands').select('status').where('id', '=', slowRelease.id).executeTakeFirstOrThrow()).status;
    await waitFor(
      'the fast lease to be destroyed while the slow release is marked running',
      async () => (await lease(fast.id)).state === 'destroyed' && (await slowStatus()) === 'running',
    );
    expect((await lease(slow.id)).state).toBe('active');
    await lane;
    expect((await lease(slow.id)).state).toBe('destroyed');
    expect(await releaseEffects(slow.id)).toBe(1);
    // Only the call that outlived its step was marked running while it was
    // out; the fast one went from queued to done in one commit.
    const releases = await db()
      .selectFrom('commands')
      .select(['target_id', sql<boolean>`started_at < finished_at`.as('marked')])
      .where('kind', '=', 'release')
      .where('target_id', 'in', [slow.id, fast.id])
      .execute();
    expect(Object.fromEntries(releases.map((r) => [r.target_id, r.marked]))).toEqual({ [slow.id]: true, [fast.id]: false });
  }, 30_000);

  test('a transient driver error yields with backoff and keeps the command queued', async () => {
    await blueprint('flaky', { transientFailureRate: 1, failOperations: ['allocateResource'], transientRetryAfterMs: 60_000 });
    const { lease: l } = await createLease(db(), { blueprint: 'flaky', holder: 'alice' }, alice);
    await drainAll();
    const resource = await db().selectFrom('resources').select('id').where('allocated_for_lease_id', '=', l.id).executeTakeFirstOrThrow();
    const [allocate] = await commandsOf(db(), 'resource', resource.id);
    expect(allocate).toMatchObject({ kind: 'allocate', status: 'queued', attempts: 1 });
    expect(allocate!.message).toMatch(/driver error \(attempt 1\), retrying in 1m: simulated transient failure in allocateResource/);
    // The failure's event and the command's new not-before commit in one
    // transaction (one now()): the gap is the driver's retry hint.
    const failure = await db()
      .selectFrom('events')
      .selectAll()
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resource.id)
      .where('type', '=', 'driver_error')
      .executeTakeFirstOrThrow();
    expect(failure).toMatchObject({
      command_id: allocate!.id,
      message: 'simulated transient failure in allocateResource',
      data: { attempt: 1, retryInMs: 60_000 },
    });
    const gap = allocate!.not_before.getTime() - failure.created_at.getTime();
    expect(gap).toBeGreaterThanOrEqual(59_999);
    expect(gap).toBeLessThanOrEqual(60_001);
    expect((await lease(l.id)).state).toBe('pending');
  });

  test('a release supersedes the work it makes pointless, even while that work is yielding', async () => {
    await blueprint('stuck', { transientFailureRate: 1, failOperations: ['activateLease'] });
    const { lease: l } = await createLease(db(), { blueprint: 'stuck', holder: 'alice' }, alice);
    await drainAll();
    expect((await lease(l.id)).state).toBe('acquired');
    // The activation failed in the grant, which kept the slot and queued the activation again, backing off.
    const grant = (await commandsOf(db(), 'lease', l.id)).find((c) => c.kind === 'grant')!;
    expect(grant).toMatchObject({
      status: 'done',
      message: expect.stringMatching(/^acquired slot 0 of resource \d+; activation failed, retrying: simulated transient failure in activateLease$/),
    });
    const retried = (await commandsOf(db(), 'lease', l.id)).find((c) => c.kind === 'activate')!;
    expect(retried).toMatchObject({ status: 'queued', caused_by: grant.id });
    expect(retried.not_before.getTime() - grant.finished_at!.getTime()).toBeGreaterThanOrEqual(400);
    await appendCommand(db(), { target: { kind: 'lease', id: l.id }, kind: 'release', actor: alice });
    await drainAll();
    expect((await lease(l.id)).state).toBe('destroyed');
    const activate = (await commandsOf(db(), 'lease', l.id)).find((c) => c.kind === 'activate')!;
    expect(activate.status).toBe('cancelled');
    expect(activate.message).toMatch(/superseded by release \(command \d+\)/);
  });

  test('a permanent driver error breaks the lease, which is destroyed and gives its slot back', async () => {
    await blueprint('doomed', { permanentFailureRate: 1, failOperations: ['activateLease'] });
    const { lease: l } = await createLease(db(), { blueprint: 'doomed', holder: 'alice' }, alice);
    await drainAll();
    const row = await lease(l.id);
    expect(row.state).toBe('destroyed');
    expect(row.message).toBe('simulated permanent failure in activateLease');
    expect(await stateEvents(db(), 'lease', l.id)).toEqual(['pending→acquired', 'acquired→broken', 'broken→destroyed']);
    // The grant that acquired the slot broke the lease: no activation of its own is queued.
    const commands = await commandsOf(db(), 'lease', l.id);
    expect(commands.find((c) => c.kind === 'grant')).toMatchObject({
      status: 'failed',
      message: 'driver failed permanently: simulated permanent failure in activateLease',
    });
    expect(commands.map((c) => c.kind)).not.toContain('activate');
    const resource = await db().selectFrom('resources').select('used_slots').where('id', '=', row.resource_id!).executeTakeFirstOrThrow();
    expect(resource.used_slots).toBe(0);
  });

  test('a lease whose resource broke fails, even when the resource is already destroyed as the refusal is read', async () => {
    const { b, l, made } = await leaseWithResourceToBreak('stillborn');
    // The resource's whole queue first (allocate fails, the lease's acquire
    // is refused, destroy), so the lease reads the refusal only afterwards:
    // the order a busy worker may well take.
    await drain().drain('resource', made.id);
    expect(await stateEvents(db(), 'resource', made.id)).toEqual(['pending→broken', 'broken→destroyed']);
    await drainAll();
    const row = await lease(l.id);
    expect(row).toMatchObject({
      state: 'destroyed',
      message: 'the resource allocated for it broke: simulated permanent failure in allocateResource',
    });
    const resources = await db().selectFrom('resources').select('id').where('blueprint_id', '=', b.id).execute();
    expect(resources).toEqual([{ id: made.id }]);
  });

  test('a refusal sent before the resource made for the lease broke asks again; the one sent after fails the lease', async () => {
    const { l, made } = await leaseWithResourceToBreak('latebreak');
    // A refusal for want of a slot, sent while the resource was still whole.
    const { command: early } = await appendInTransaction(
      db(),
      { target: { kind: 'lease', id: l.id }, kind: 'deny', payload: { resourceId: made.id, reason: 'no free slot' }, actor: alice },
      { fromOutside: false },
    );
    await drain().drain('resource', made.id);
    await drain().drain('lease', l.id);
    const denies = (await commandsOf(db(), 'lease', l.id)).filter((c) => c.kind === 'deny');
    expect(denies.map((c) => [c.id === early.id, c.status, c.message])).toEqual([
      [true, 'done', `resource ${made.id} refused (no free slot); asking again`],
      [false, 'failed', 'the resource allocated for it broke: simulated permanent failure in allocateResource'],
    ]);
    expect((await lease(l.id)).state).toBe('destroyed');
  });

  test('a pending lease waiting at a full blueprint can be released, and the next waiter is served', async () => {
    await blueprint('tight', {}, 1);
    const { lease: first } = await createLease(db(), { blueprint: 'tight', holder: 'a' }, alice);
    await drainAll();
    const { lease: second } = await createLease(db(), { blueprint: 'tight', holder: 'b' }, alice);
    const { lease: third } = await createLease(db(), { blueprint: 'tight', holder: 'c' }, alice);
    await drainAll();
    expect([(await lease(second.id)).state, (await lease(third.id)).state]).toEqual(['pending', 'pending']);
    await appendCommand(db(), { target: { kind: 'lease', id: second.id }, kind: 'release', actor: alice });
    await drainAll();
    expect((await lease(second.id)).state).toBe('destroyed');
    expect(await stateEvents(db(), 'lease', second.id)).toEqual(['pending→released', 'released→destroyed']);
    await appendCommand(db(), { target: { kind: 'lease', id: first.id }, kind: 'release', actor: alice });
    await drainAll();
    expect((await lease(third.id)).state).toBe('active');
    const waiters = await db().selectFrom('blueprint_waiters').select('lease_id').execute();
    expect(waiters).toEqual([]);
    const resources = await db()
      .selectFrom('resources')
      .select('id')
      .where('blueprint_id', '=', (await lease(third.id)).blueprint_id)
      .execute();
    expect(resources).toHaveLength(1);
  });

  test('a waiting lease released leaves the line at once: no longer counted, never served, its row gone with the next serving', async () => {
    const b = await blueprint('quitting', {}, 1);
    const { lease: holder } = await createLease(db(), { blueprint: 'quitting', holder: 'a' }, alice);
    await drainAll();
    const { lease: quitter } = await createLease(db(), { blueprint: 'quitting', holder: 'b' }, alice);
    const { lease: next } = await createLease(db(), { blueprint: 'quitting', holder: 'c' }, alice);
    await drainAll();
    expect((await readBlueprintDetail(db(), b.id)).waitingLeases).toBe(2);

    // Only the lease is drained: the blueprint has not looked at its line since.
    await appendCommand(db(), { target: { kind: 'lease', id: quitter.id }, kind: 'release', actor: alice });
    await drain().drain('lease', quitter.id);
    expect((await lease(quitter.id)).state).toBe('destroyed');
    expect((await readBlueprintDetail(db(), b.id)).waitingLeases).toBe(1);

    await appendCommand(db(), { target: { kind: 'lease', id: holder.id }, kind: 'release', actor: alice });
    await drainAll();
    expect((await lease(next.id)).state).toBe('active');
    const acquires = await db()
      .selectFrom('commands')
      .select('payload')
      .where('kind', '=', 'acquire')
      .where(sql<string>`payload->>'leaseId'`, '=', String(quitter.id))
      .execute();
    expect(acquires).toEqual([]);
    expect(await db().selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', b.id).execute()).toEqual([]);
  });

  test('a release that reaches an already destroyed lease is a no-op, never a second destroy', async () => {
    await blueprint('twice');
    const { lease: l } = await createLease(db(), { blueprint: 'twice', holder: 'alice' }, alice);
    await drainAll();
    await appendCommand(db(), { target: { kind: 'lease', id: l.id }, kind: 'release', actor: alice });
    await drainAll();
    // What a second release that passed its state check just before the
    // first one finished looks like by the time it is drained.
    await db()
      .insertInto('commands')
      .values({ target_kind: 'lease', target_id: l.id, kind: 'release', issued_by: 'bob', source: 'api', dedup_key: 'release' })
      .execute();
    await drain().drain('lease', l.id);
    const late = (await commandsOf(db(), 'lease', l.id)).filter((c) => c.kind === 'release').at(-1)!;
    expect(late).toMatchObject({ issued_by: 'bob', status: 'done', message: `nothing to do: lease ${l.id} is destroyed` });
    expect(await stateEvents(db(), 'lease', l.id)).toEqual(['pending→acquired', 'acquired→active', 'active→released', 'released→destroyed']);
    expect(await releaseEffects(l.id)).toBe(1);
  });

  test('requests queued together at a blueprint are decided as one run, and a run never promises a slot twice', async () => {
    const b = await createBlueprint(
      db(),
      { name: 'line-runs', driver: 'simulated', settings: {}, maxResources: 1, minResources: 1, leasesPerResource: 2 },
      alice,
    );
    await appendCommand(db(), { target: { kind: 'blueprint', id: b.id }, kind: 'top_up', actor: alice });
    await drainAll();
    const leases = [];
    for (const holder of ['a', 'b', 'c', 'd', 'e']) leases.push((await createLease(db(), { blueprint: 'line-runs', holder }, alice)).lease);
    // Each lease's allocate: five requests wait in the blueprint's queue.
    for (const l of leases) await drain().drain('lease', l.id);

    // The first is taken alone with the lock; the other four as one run.
    expect(await drain().drain('blueprint', b.id)).toBe(5);
    const { rows: requests } = await sql<{ status: string; committed_at: string }>`
      select status, finished_at::text as committed_at from commands
      where target_kind = 'blueprint' and target_id = ${b.id} and kind = 'need_resource' order by id
    `.execute(db());
    expect(requests.map((r) => r.status)).toEqual(['done', 'done', 'done', 'done', 'done']);
    expect(new Set(requests.slice(1).map((r) => r.committed_at)).size).toBe(1);
    expect(requests[1]!.committed_at).not.toBe(requests[0]!.committed_at);
    // Two slots, two acquires: the second decision of the run counted the
    // slot the first promised, though its acquire was not yet written.
    const acquires = await db()
      .selectFrom('commands')
      .select('payload')
      .where('kind', '=', 'acquire')
      .where('caused_by', 'in', (eb) =>
        eb
          .selectFrom('commands')
          .select('id')
          .where('target_kind', '=', 'blueprint')
          .where('target_id', '=', b.id)
          .where('kind', '=', 'need_resource'),
      )
      .execute();
    expect(acquires.map((a) => (a.payload as { leaseId: number }).leaseId)).toEqual([leases[0]!.id, leases[1]!.id]);
    const waiting = await db().selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', b.id).orderBy('lease_id').execute();
    expect(waiting.map((w) => w.lease_id)).toEqual(leases.slice(2).map((l) => l.id));

    await drainAll();
    const states = await Promise.all(leases.map(async (l) => (await lease(l.id)).state));
    expect(states).toEqual(['active', 'active', 'pending', 'pending', 'pending']);
    const denied = await db()
      .selectFrom('commands')
      .select('id')
      .where('kind', '=', 'deny')
      .where(
        'target_id',
        'in',
        leases.map((l) => l.id),
      )
      .execute();
    expect(denied).toEqual([]);
  });

  test('leases give their slots back themselves: the resource hears only of what may be its last, and a retired one is destroyed once empty', async () => {
    const b = await createBlueprint(db(), { name: 'returns', driver: 'simulated', settings: {}, maxResources: 1, leasesPerResource: 4 }, alice);
    const leases = [];
    for (const holder of ['a', 'b', 'c', 'd']) leases.push((await createLease(db(), { blueprint: 'returns', holder }, alice)).lease);
    await drainAll();
    const resourceId = (await lease(leases[0]!.id)).resource_id!;
    const before = await db().selectFrom('resources').selectAll().where('id', '=', resourceId).executeTakeFirstOrThrow();
    expect(before).toMatchObject({ blueprint_id: b.id, used_slots: 4, idle_since: null });
    const resourceCommands = async () =>
      (
        await db()
          .selectFrom('commands')
          .select(['kind', 'status'])
          .where('target_kind', '=', 'resource')
          .where('target_id', '=', resourceId)
          .where('kind', 'not in', ['allocate', 'activate', 'acquire'])
          .orderBy('id')
          .execute()
      ).map((c) => [c.kind, c.status]);
    const release = async (leaseId: number) => {
      await appendCommand(db(), { target: { kind: 'lease', id: leaseId }, kind: 'release', actor: alice });
      await drain().drain('lease', leaseId);
    };

    // Three of four given back: nothing reaches the resource, whose row stays as it was.
    for (const l of leases.slice(0, 3)) await release(l.id);
    expect(await resourceCommands()).toEqual([]);
    expect(await db().selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resourceId).execute()).toEqual([
      { lease_id: leases[3]!.id },
    ]);
    expect(await db().selectFrom('resources').select('version').where('id', '=', resourceId).executeTakeFirstOrThrow()).toEqual({
      version: before.version,
    });

    // Retired with one lease left, then that lease ends: its return asks for a count, which finds it empty and destroys it.
    await appendInTransaction(db(), { target: { kind: 'resource', id: resourceId }, kind: 'retire', actor: alice }, { fromOutside: false });
    await drain().drain('resource', resourceId);
    expect(await db().selectFrom('resources').select(['state', 'used_slots']).where('id', '=', resourceId).executeTakeFirstOrThrow()).toEqual({
      state: 'released',
      used_slots: 1,
    });
    await release(leases[3]!.id);
    await drainAll();
    expect(await resourceCommands()).toEqual([
      ['retire', 'done'],
      ['count_slots', 'done'],
      ['destroy', 'done'],
    ]);
    const freed = await db()
      .selectFrom('events')
      .select(['data'])
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resourceId)
      .where('type', '=', 'slot_freed')
      .orderBy('id')
      .execute();
    expect(freed.map((e) => (e.data as { leaseId: number }).leaseId)).toEqual(leases.map((l) => l.id));
    const after = await db().selectFrom('resources').selectAll().where('id', '=', resourceId).executeTakeFirstOrThrow();
    expect(after).toMatchObject({ state: 'destroyed', used_slots: 0 });
    expect(await db().selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resourceId).execute()).toEqual([]);
  });

  test('a command newer than this worker understands is left queued, untouched but for a note', async () => {
    await blueprint('future');
    const { lease: l } = await createLease(db(), { blueprint: 'future', holder: 'alice' }, alice);
    await drainAll();
    const inserted = await db()
      .insertInto('commands')
      .values({
        target_kind: 'lease',
        target_id: l.id,
        kind: 'release',
        version: 99,
        payload: JSON.stringify({ graceful: true }),
        issued_by: 'new-cli',
        source: 'cli',
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await drain().drain('lease', l.id);
    const after = await db().selectFrom('commands').selectAll().where('id', '=', inserted.id).executeTakeFirstOrThrow();
    expect(after).toMatchObject({ status: 'queued', version: 99, payload: { graceful: true }, attempts: 0 });
    expect(after.message).toBe('waiting for a worker that handles lease release v99');
    expect((await lease(l.id)).state).toBe('active');
  });

  test('a drain that finds the lock taken applies nothing; the holder, once it lets go, finds what was queued meanwhile', async () => {
    await blueprint('held');
    const { lease: l } = await createLease(db(), { blueprint: 'held', holder: 'alice' }, alice);
    // The new lease's first command is its blueprint's need_resource.
    const holder = await database().pool.connect();
    try {
      await holder.query('select pg_advisory_lock(object_lock_key($1, $2))', ['blueprint', l.blueprint_id]);
      expect(await drain().drain('blueprint', l.blueprint_id)).toBe(0);
      expect((await commandsOf(db(), 'blueprint', l.blueprint_id)).map((c) => c.status)).toEqual(['queued']);
    } finally {
      await holder.query('select pg_advisory_unlock(object_lock_key($1, $2))', ['blueprint', l.blueprint_id]);
      holder.release();
    }
    expect(await drain().drain('blueprint', l.blueprint_id)).toBeGreaterThan(0);
    expect((await commandsOf(db(), 'blueprint', l.blueprint_id))[0]!.status).toBe('done');
  });

  test('announces every command it settles, after the commit', async () => {
    await blueprint('announced');
    const { lease: l } = await createLease(db(), { blueprint: 'announced', holder: 'alice' }, alice);
    const listener = await database().pool.connect();
    const notices: { id: number; target: string; status: string; caused: number[]; committed: string | undefined }[] = [];
    const pending: Promise<void>[] = [];
    listener.on('notification', (n) => {
      const notice = JSON.parse(n.payload!) as { id: number; target: string; status: string; caused: number[] };
      // What a waiter reading on the notice would find.
      pending.push(
        db()
          .selectFrom('commands')
          .select('status')
          .where('id', '=', notice.id)
          .executeTakeFirst()
          .then((row) => void notices.push({ ...notice, committed: row?.status })),
      );
    });
    try {
      await listener.query('listen slipway_commands');
      await drainAll();
      await appendCommand(db(), { target: { kind: 'lease', id: l.id }, kind: 'release', actor: alice });
      await drainAll();
      await sql`select pg_sleep(0.2)`.execute(db());
      await Promise.all(pending);
    } finally {
      await listener.query('unlisten slipway_commands');
      // The connection goes back to the pool: a later user's notices must not reach this handler.
      listener.removeAllListeners('notification');
      listener.release();
    }
    const settled = (await commandsOf(db(), 'lease', l.id)).filter((c) => c.status === 'done');
    expect(settled.map((c) => c.kind)).toEqual(['grant', 'release']);
    // Each notice names what its command caused: the release, its slot's return to the resource.
    const causedBy = async (id: number) =>
      (await db().selectFrom('commands').select('id').where('caused_by', '=', id).orderBy('id').execute()).map((c) => c.id);
    expect(await causedBy(settled[1]!.id)).toHaveLength(1);
    for (const command of settled) {
      const caused = await causedBy(command.id);
      expect(notices.filter((n) => n.id === command.id)).toEqual([
        { id: command.id, target: `lease:${l.id}`, status: 'done', caused, committed: 'done' },
      ]);
    }
  });

  test("a write to the object behind its drain's back fails the version check, and nothing of the command is committed", async () => {
    // A release long enough to be seen in its driver call on a loaded machine.
    await blueprint('tampered', { operationLatencyMs: { releaseLease: 5000 } });
    const { lease: l } = await createLease(db(), { blueprint: 'tampered', holder: 'alice' }, alice);
    await drainAll();
    expect((await lease(l.id)).state).toBe('active');
    const { command: release } = await appendCommand(db(), { target: { kind: 'lease', id: l.id }, kind: 'release', actor: alice });
    const draining = drain().drain('lease', l.id);
    const releaseStatus = async () =>
      (await db().selectFrom('commands').select('status').where('id', '=', release.id).executeTakeFirstOrThrow()).status;
    for (let i = 0; i < 100 && (await releaseStatus()) !== 'running'; i++) await sql`select pg_sleep(0.02)`.execute(db());
    // The release is in its driver call, holding the row as it read it.
    expect(await releaseStatus()).toBe('running');
    await db().updateTable('leases').set({ version: sql<number>`version + 1` }).where('id', '=', l.id).execute();
    // Nothing of it is committed: the command goes back to the queue with
    // backoff, saying why, and the object is let go, to be read afresh.
    expect(await draining).toBe(0);
    expect((await lease(l.id)).state).toBe('active');
    expect(await stateEvents(db(), 'lease', l.id)).toEqual(['pending→acquired', 'acquired→active']);
    const after = await db().selectFrom('commands').selectAll().where('id', '=', release.id).executeTakeFirstOrThrow();
    expect(after).toMatchObject({ status: 'queued', attempts: 1 });
    expect(after.message).toMatch(/^internal error \(attempt 1\), retrying in 500ms: .*is at version/);
  });
});

test('held notices go out in one statement however many there are (more than a select list may hold)', async () => {
  const count = 2000;
  const listener = await database().pool.connect();
  const client = await database().pool.connect();
  try {
    const received: string[] = [];
    listener.on('notification', (n) => {
      if (n.channel === COMMANDS_CHANNEL && n.payload) received.push(n.payload);
    });
    await listener.query(`listen ${COMMANDS_CHANNEL}`);
    const notices = Array.from({ length: count }, (_, i) => commandNotice({ kind: 'lease', id: i + 1 }, i + 1, 'done'));
    await client.query(await simpleQueryText(client, ['begin', noticesStatement(notices), 'commit']));
    await waitFor(`${count} notices`, async () => received.length === count);
    expect(received.map((p) => JSON.parse(p).id)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
  } finally {
    await listener.query(`unlisten ${COMMANDS_CHANNEL}`);
    listener.release();
    client.release();
  }
});
