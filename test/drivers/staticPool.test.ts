import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { validateDriverSettings } from '../../src/drivers/registry.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand, appendInTransaction } from '../../src/queue/appendCommand.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { runCli } from '../cli/runCli.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';

// The static-pool driver run by a real worker: leases land on the entries of
// the settings up to their slots, and a settings update (through the CLI or
// the queue) is reconciled: removed entries drain and go, added ones are used.
const actor = { issuedBy: 'tester', source: 'cli' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let worker: SlipwayWorker;
const db = () => database.db;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 20 });
  worker = await SlipwayWorker.start(database, loadConfig({ DATABASE_URL: database.url }), testLog);
});
afterAll(async () => {
  await worker?.stop();
  await database?.drop();
});

const hostA = { name: 'host-a', slots: 2, attributes: { address: '10.0.0.1' } };
const hostB = { name: 'host-b', slots: 1, attributes: { address: '10.0.0.2' } };
const hostC = { name: 'host-c', slots: 1, attributes: { address: '10.0.0.3' } };

const lease = (id: number) => db().selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const resource = (id: number) => db().selectFrom('resources').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const activeLease = async (holder: string) => {
  const { lease: created } = await createLease(db(), { blueprint: 'hosts', holder }, actor);
  return waitFor(`lease ${created.id} active`, async () => {
    const row = await lease(created.id);
    return row.state === 'active' ? row : undefined;
  });
};
const entryOf = (row: { attributes: unknown }) => (row.attributes as { entry?: string }).entry;
/** The live resource standing for an entry. */
const resourceOfEntry = async (entry: string) =>
  db()
    .selectFrom('resources')
    .selectAll()
    .where(sql<string>`attributes ->> 'entry'`, '=', entry)
    .where('state', '!=', 'destroyed')
    .executeTakeFirstOrThrow();
const release = async (id: number) => {
  await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor });
  await waitFor(`lease ${id} destroyed`, async () => (await lease(id)).state === 'destroyed');
};
/** Settles once the blueprint has decided about a waiting lease (so "it is still pending" means something). */
const waitingAtBlueprint = (leaseId: number) =>
  waitFor(`lease ${leaseId} waiting at the blueprint`, async () => {
    const row = await db().selectFrom('blueprint_waiters').select('lease_id').where('lease_id', '=', leaseId).executeTakeFirst();
    return row !== undefined;
  });
const claims = async () => (await db().selectFrom('static_pool_claims').select('entry').orderBy('entry').execute()).map((c) => c.entry);

describe('static-pool driver through a worker', () => {
  test('leases land on entries up to their slots; removed entries drain and go; added entries are used', async () => {
    await createBlueprint(db(), { name: 'hosts', driver: 'static-pool', settings: { entries: [hostA, hostB] }, maxResources: 2 }, actor);

    // Three leases fill host-a's two slots and host-b's one; a fourth waits.
    const first = await Promise.all(['l1', 'l2', 'l3'].map(activeLease));
    expect(first.map(entryOf).sort()).toEqual(['host-a', 'host-a', 'host-b']);
    for (const row of first) {
      expect(row.attributes).toMatchObject({ address: entryOf(row) === 'host-a' ? '10.0.0.1' : '10.0.0.2' });
    }
    expect((await resourceOfEntry('host-a')).capacity).toBe(2);
    expect((await resourceOfEntry('host-b')).capacity).toBe(1);
    const { lease: fourth } = await createLease(db(), { blueprint: 'hosts', holder: 'l4' }, actor);
    await waitingAtBlueprint(fourth.id);
    expect((await lease(fourth.id)).state).toBe('pending');

    // Adding host-c through the CLI raises the limit and serves the waiting lease there.
    const added = await runCli(['blueprint', 'update', 'hosts', '--setting', `entries=${JSON.stringify([hostA, hostB, hostC])}`], database.url);
    expect(added.stderr).toBe('');
    expect(added.code).toBe(0);
    const served = await waitFor('the fourth lease active', async () => {
      const row = await lease(fourth.id);
      return row.state === 'active' ? row : undefined;
    });
    expect(entryOf(served)).toBe('host-c');
    expect((await db().selectFrom('blueprints').select('max_resources').where('name', '=', 'hosts').executeTakeFirstOrThrow()).max_resources).toBe(3);

    // Removing host-a: it takes no new lease, even with a slot free, and goes when its last lease ends.
    const hostAResource = await resourceOfEntry('host-a');
    const { command: update } = await appendCommand(db(), {
      target: { kind: 'blueprint', id: hostAResource.blueprint_id },
      kind: 'update_settings',
      payload: { settings: { entries: [hostB, hostC] } },
      actor,
    });
    await waitFor('host-a retired', async () => (await resource(hostAResource.id)).state === 'released');
    const updated = await db().selectFrom('commands').select(['status', 'message']).where('id', '=', update.id).executeTakeFirstOrThrow();
    expect(updated).toEqual({ status: 'done', message: `settings updated; retiring resource(s) ${hostAResource.id}; limit 3 → 2` });

    const [onA1, onA2] = first.filter((row) => entryOf(row) === 'host-a');
    const onB = first.find((row) => entryOf(row) === 'host-b')!;
    await release(onA1!.id);
    await waitFor(
      'host-a has a free slot',
      async () => (await db().selectFrom('resource_slots').select('slot').where('resource_id', '=', hostAResource.id).execute()).length === 1,
    );
    const { lease: fifth } = await createLease(db(), { blueprint: 'hosts', holder: 'l5' }, actor);
    await waitingAtBlueprint(fifth.id);
    expect((await lease(fifth.id)).state).toBe('pending');
    expect(await db().selectFrom('resource_slots').select('lease_id').where('resource_id', '=', hostAResource.id).execute()).toEqual([
      { lease_id: onA2!.id },
    ]);

    await release(onA2!.id);
    await waitFor('host-a destroyed', async () => (await resource(hostAResource.id)).state === 'destroyed');
    await waitFor('host-a unclaimed', async () => !(await claims()).includes('host-a'));
    expect(await claims()).toEqual(['host-b', 'host-c']);

    // The waiting lease is served when a remaining entry frees a slot.
    expect((await lease(fifth.id)).state).toBe('pending');
    await release(onB.id);
    const fifthServed = await waitFor('the fifth lease active', async () => {
      const row = await lease(fifth.id);
      return row.state === 'active' ? row : undefined;
    });
    expect(entryOf(fifthServed)).toBe('host-b');
    const live = await db()
      .selectFrom('blueprints')
      .select(['live_resources', 'max_resources'])
      .where('name', '=', 'hosts')
      .executeTakeFirstOrThrow();
    expect(live).toEqual({ live_resources: 2, max_resources: 2 });
  });

  test("a pool of entries with their own slots shows the slots its resources have, not the blueprint's default", async () => {
    const entries = [
      { name: 'big', slots: 4 },
      { name: 'small', slots: 2 },
    ];
    const { id } = await createBlueprint(
      db(),
      { name: 'mixed', driver: 'static-pool', settings: { entries }, maxResources: 2, minResources: 2 },
      actor,
    );
    await appendCommand(db(), { target: { kind: 'blueprint', id }, kind: 'top_up', actor });
    await waitFor('both entries made', async () => {
      const live = await db().selectFrom('resources').select('state').where('blueprint_id', '=', id).execute();
      return live.length === 2 && live.every((r) => r.state === 'active');
    });
    const shown = await runCli(['blueprint', 'show', 'mixed'], database.url);
    expect(shown.stdout).toMatch(/\n {2}leases\/resource +2–4 \(as its driver made each live resource; 1 where the driver does not say\)\n/);
  });

  test('many leases at once: each entry stands for one resource and takes no more leases than its slots', async () => {
    const slots = [1, 2, 3, 1, 2];
    const entries = slots.map((n, i) => ({ name: `box-${i}`, slots: n }));
    await createBlueprint(db(), { name: 'crowd', driver: 'static-pool', settings: { entries }, maxResources: entries.length }, actor);
    const total = slots.reduce((a, b) => a + b, 0);
    const created = await Promise.all(Array.from({ length: total + 3 }, (_, i) => createLease(db(), { blueprint: 'crowd', holder: `h${i}` }, actor)));
    const ids = created.map((c) => c.lease.id);
    const rows = await waitFor('every slot taken', async () => {
      const all = await db().selectFrom('leases').selectAll().where('id', 'in', ids).execute();
      return all.filter((r) => r.state === 'active').length === total ? all : undefined;
    });
    const perEntry = new Map<string, number>();
    for (const row of rows.filter((r) => r.state === 'active')) perEntry.set(entryOf(row)!, (perEntry.get(entryOf(row)!) ?? 0) + 1);
    expect(Object.fromEntries(perEntry)).toEqual(Object.fromEntries(entries.map((e) => [e.name, e.slots])));
    const resources = await db()
      .selectFrom('resources as r')
      .innerJoin('blueprints as b', 'b.id', 'r.blueprint_id')
      .select(['r.attributes', 'r.capacity'])
      .where('b.name', '=', 'crowd')
      .execute();
    expect(resources.map((r) => [entryOf(r), r.capacity]).sort()).toEqual(entries.map((e) => [e.name, e.slots]));
    for (const row of rows.filter((r) => r.state !== 'active')) await waitingAtBlueprint(row.id);
    for (const id of ids) await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor });
    await waitFor('every lease destroyed', async () => {
      const left = await db().selectFrom('leases').select('id').where('id', 'in', ids).where('state', '!=', 'destroyed').execute();
      return left.length === 0;
    });
  });

  test('an entry whose definition changes is retired and comes back with the new one', async () => {
    const wide = { ...hostA, name: 'wide', slots: 1 };
    const bp = await createBlueprint(db(), { name: 'changing', driver: 'static-pool', settings: { entries: [wide] }, maxResources: 1 }, actor);
    const { lease: l } = await createLease(db(), { blueprint: 'changing', holder: 'x' }, actor);
    await waitFor('lease active', async () => (await lease(l.id)).state === 'active');
    const before = (await lease(l.id)).resource_id!;

    await appendCommand(db(), {
      target: { kind: 'blueprint', id: bp.id },
      kind: 'update_settings',
      payload: { settings: { entries: [{ ...wide, slots: 3 }] } },
      actor,
    });
    await waitFor('the old resource retired', async () => (await resource(before)).state === 'released');
    await release(l.id);
    await waitFor('the old resource destroyed', async () => (await resource(before)).state === 'destroyed');

    const { lease: next } = await createLease(db(), { blueprint: 'changing', holder: 'y' }, actor);
    await waitFor('next lease active', async () => (await lease(next.id)).state === 'active');
    const after = await resource((await lease(next.id)).resource_id!);
    expect(after.id).not.toBe(before);
    expect(after.capacity).toBe(3);
  });

  test("settings are validated: by every append from outside, the CLI's included, before anything is queued, and again when the update is applied", async () => {
    expect(() => validateDriverSettings('static-pool', { entries: [] })).toThrow(/list at least one entry/);
    expect(() => validateDriverSettings('static-pool', { entries: [hostA, hostA] })).toThrow(/entry names must be unique/);
    expect(() => validateDriverSettings('static-pool', { entries: [{ name: 'x', slots: 0 }] })).toThrow(/settings.entries.0.slots/);
    expect(validateDriverSettings('static-pool', { entries: [{ name: 'x' }] })).toEqual({ entries: [{ name: 'x', slots: 1, attributes: {} }] });

    const before = await db().selectFrom('commands').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
    const refused = await runCli(['blueprint', 'update', 'hosts', '--settings', '{"entries": []}'], database.url);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/invalid settings for the static-pool driver: settings.entries: list at least one entry/);
    const none = await runCli(['blueprint', 'update', 'hosts'], database.url);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/give the new settings with --settings <json> or --setting <key=value>/);
    const after = await db().selectFrom('commands').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);

    const blueprint = await db().selectFrom('blueprints').select(['id', 'settings', 'version']).where('name', '=', 'hosts').executeTakeFirstOrThrow();
    const update = {
      target: { kind: 'blueprint', id: blueprint.id },
      kind: 'update_settings',
      payload: { settings: { entries: 'all of them' } },
      actor,
    } as const;
    // Every append from outside checks them (admissionChecks)...
    await expect(appendCommand(db(), update)).rejects.toThrow(/invalid settings for the static-pool driver: settings.entries/);
    // ...and the drain checks again, for settings that no longer fit when it applies them.
    const { command } = await appendInTransaction(db(), update, { fromOutside: false });
    const settled = await waitFor('the update settled', async () => {
      const row = await db().selectFrom('commands').select(['status', 'message']).where('id', '=', command.id).executeTakeFirstOrThrow();
      return row.status === 'failed' ? row : undefined;
    });
    expect(settled.message).toMatch(/invalid settings for the static-pool driver: settings.entries/);
    expect(await db().selectFrom('blueprints').select(['settings', 'version']).where('id', '=', blueprint.id).executeTakeFirstOrThrow()).toEqual({
      settings: blueprint.settings,
      version: blueprint.version,
    });
  });
});
