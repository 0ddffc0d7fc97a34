import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { commandsOf, stateEvents } from '../helpers/objectHistory.ts';
import { handDrainSuite } from './support/handDrain.ts';

// Expiry and heartbeats with the drain and the collector run by hand: each
// race is set up in the exact order the test names.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

beforeAll(async () => {
  await createBlueprint(db(), { name: 'pool', driver: 'simulated', maxResources: 20, leasesPerResource: 1 }, alice);
});

const lease = (id: number) => db().selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const releasesOf = async (id: number) => (await commandsOf(db(), 'lease', id)).filter((c) => c.kind === 'release');
const renew = (id: number, payload: object = {}) => appendCommand(db(), { target: { kind: 'lease', id }, kind: 'renew', payload, actor: alice });

async function activeLease(options: { expiresInMs?: number; heartbeatMs?: number }) {
  const { lease: created } = await createLease(db(), { blueprint: 'pool', holder: 'alice', ...options }, alice);
  await hand.all();
  expect((await lease(created.id)).state).toBe('active');
  return created.id;
}

/** Waits until the database's clock is past the lease's deadline. */
async function waitUntilExpired(id: number) {
  await waitFor(`lease ${id} to be past its deadline`, async () => {
    const l = await lease(id);
    const deadline = l.expires_at ?? l.heartbeat_deadline;
    return deadline !== null && deadline.getTime() < Date.now() - 50;
  });
}

/** The lease ids a pass asked to release. */
const released = (pass: Awaited<ReturnType<typeof hand.pass>>) =>
  (pass.steps.expireLeases?.actions ?? []).filter((a) => a.kind === 'release').map((a) => Number(a.target.split(':')[1]));

describe('expiry', () => {
  test('an expired lease is released once, by system:gc with source gc and a reason saying it expired', async () => {
    const id = await activeLease({ expiresInMs: 1000 });
    await waitUntilExpired(id);
    expect(released(await hand.pass())).toContain(id);
    // A second pass before the release is applied does not ask again.
    expect(released(await hand.pass())).not.toContain(id);
    await hand.all();
    expect(released(await hand.pass())).not.toContain(id);

    const releases = await releasesOf(id);
    expect(releases).toHaveLength(1);
    expect(releases[0]).toMatchObject({
      issued_by: 'system:gc',
      source: 'gc',
      status: 'done',
      message: 'released and destroyed',
      payload: { ifExpired: true },
    });
    expect(releases[0]!.reason).toMatch(/^expired: its expiry time .* passed$/);
    expect(await stateEvents(db(), 'lease', id)).toEqual(['pending→acquired', 'acquired→active', 'active→released', 'released→destroyed']);
  });

  test('two passes at once release an expired lease once', async () => {
    const id = await activeLease({ expiresInMs: 1000 });
    await waitUntilExpired(id);
    const passes = await Promise.all([hand.pass(), hand.pass(), hand.pass()]);
    expect(passes.flatMap(released).filter((l) => l === id)).toHaveLength(1);
    await hand.all();
    expect(await releasesOf(id)).toHaveLength(1);
    expect((await lease(id)).state).toBe('destroyed');
  });

  test('a renewal queued before the expiry release wins: the release settles as a no-op', async () => {
    const id = await activeLease({ expiresInMs: 1000 });
    await waitUntilExpired(id);
    await renew(id, { expiresInMs: 3_600_000 });
    // The lease's row still shows it expired, so the collector asks...
    expect(released(await hand.pass())).toContain(id);
    await hand.all();
    // ...but the renewal was queued first and is applied first.
    const after = await lease(id);
    expect(after.state).toBe('active');
    expect(after.expires_at!.getTime()).toBeGreaterThan(Date.now() + 3_000_000);
    expect(after.term_ms).toBe(3_600_000);
    const [release] = await releasesOf(id);
    expect(release).toMatchObject({
      source: 'gc',
      status: 'done',
      message: 'not released: the lease was renewed before its expiry release was applied',
    });
    const renewCommand = (await commandsOf(db(), 'lease', id)).find((c) => c.kind === 'renew')!;
    expect(renewCommand.id).toBeLessThan(release!.id);
    expect(renewCommand.status).toBe('done');
    expect(await releaseEffects(id)).toBe(0);
  });

  test('a renewal queued after the expiry release is too late: the lease is released (and destroyed), the renewal is a no-op', async () => {
    const id = await activeLease({ expiresInMs: 1000 });
    await waitUntilExpired(id);
    expect(released(await hand.pass())).toContain(id);
    await renew(id);
    await hand.all();
    expect((await lease(id)).state).toBe('destroyed');
    const renewal = (await commandsOf(db(), 'lease', id)).find((c) => c.kind === 'renew')!;
    expect(renewal).toMatchObject({ status: 'done', message: `nothing to do: lease ${id} is destroyed` });
  });

  test("someone's release that joins a conditional expiry release still releases the lease", async () => {
    const id = await activeLease({ expiresInMs: 1000 });
    await waitUntilExpired(id);
    await renew(id, { expiresInMs: 3_600_000 });
    expect(released(await hand.pass())).toContain(id);
    const joined = await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: alice });
    expect(joined.coalesced).toBe(true);
    await hand.all();
    expect((await lease(id)).state).toBe('destroyed');
  });

  test('only the expiry release is conditional: a plain release releases an unexpired lease, whatever its source', async () => {
    const id = await activeLease({ expiresInMs: 3_600_000 });
    await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: { issuedBy: 'someone', source: 'gc' } });
    await hand.all();
    expect((await lease(id)).state).toBe('destroyed');
  });

  test('a renewal without a term extends by the term the lease was given; a lease with neither expiry nor heartbeat has nothing to renew', async () => {
    const id = await activeLease({ expiresInMs: 60_000 });
    const before = (await lease(id)).expires_at!;
    await sleep(20);
    await renew(id);
    await hand.all();
    const after = await lease(id);
    expect(after.expires_at!.getTime()).toBeGreaterThan(before.getTime());
    expect(after.term_ms).toBe(60_000);

    const plain = await activeLease({});
    const { command } = await renew(plain);
    await hand.all();
    const settled = (await commandsOf(db(), 'lease', plain)).find((c) => c.id === command.id)!;
    expect(settled).toMatchObject({ status: 'done', message: 'nothing to renew: the lease has no expiry and no heartbeat' });
    expect((await lease(plain)).expires_at).toBeNull();
  });

  test('a renewal of a released lease is refused before it is queued', async () => {
    const id = await activeLease({ expiresInMs: 60_000 });
    await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: alice });
    await hand.all();
    await expect(renew(id)).rejects.toThrow(/lease \d+ is destroyed; renew is accepted only when it is pending, acquired, active/);
  });
});

describe('heartbeats', () => {
  test('a heartbeat lease kept renewing stays; once its holder stops, it is released once, with a reason naming the heartbeat', async () => {
    const id = await activeLease({ heartbeatMs: 1000 });
    const first = await lease(id);
    expect(first.heartbeat_deadline).not.toBeNull();
    expect(first.expires_at).toBeNull();
    // Beat for longer than the deadline allows without beats.
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      await renew(id);
      await hand.all();
      expect(released(await hand.pass())).not.toContain(id);
      await sleep(300);
    }
    expect((await lease(id)).state).toBe('active');
    // The holder stops.
    await waitUntilExpired(id);
    expect(released(await hand.pass())).toContain(id);
    await hand.all();
    expect(released(await hand.pass())).not.toContain(id);
    const releases = await releasesOf(id);
    expect(releases).toHaveLength(1);
    expect(releases[0]).toMatchObject({ issued_by: 'system:gc', source: 'gc', status: 'done' });
    expect(releases[0]!.reason).toMatch(/^expired: no heartbeat renewal for 2 × 1s/);
    expect((await lease(id)).state).toBe('destroyed');
  });

  test('the heartbeat clock starts when the lease becomes active, not while it waits for capacity', async () => {
    const { lease: created } = await createLease(db(), { blueprint: 'pool', holder: 'bob', heartbeatMs: 1000 }, alice);
    expect(created.heartbeat_deadline).toBeNull();
    expect(created.heartbeat_ms).toBe(1000);
    await hand.all();
    expect((await lease(created.id)).heartbeat_deadline).not.toBeNull();
  });
});

async function releaseEffects(leaseId: number): Promise<number> {
  const row = await db()
    .selectFrom('simulated_effects')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('operation', '=', 'releaseLease')
    .where('object_id', '=', leaseId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
