import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { DirectoryDriver } from '../../src/drivers/DirectoryDriver.ts';
import { readState } from '../../src/metrics/scrape.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { updateBlueprint } from '../../src/objects/updateBlueprint.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { commandsOf } from '../helpers/objectHistory.ts';
import { WORKSPACE } from '../drivers/execFixtures.ts';
import { handDrainSuite } from './support/handDrain.ts';

// The collector's other half of observing: what a blueprint's driver lists
// that no resource stands for is recorded as an orphan in the pass that
// first finds it, destroyed through the driver (as `system:gc`, with a
// reason) only when the blueprint says `destroy` and a second pass finds it
// still unmatched, and never taken for one while its resource's rows are in
// flight. Drain and collector run by hand.
const operator = { issuedBy: 'alice@host', source: 'cli', reason: 'testing orphans' } as const;
const { db, hand } = handDrainSuite();
const roots: string[] = [];
afterAll(async () => Promise.all(roots.map((root) => rm(root, { recursive: true, force: true }))));
const tempRoot = async () => {
  const root = await mkdtemp(path.join(tmpdir(), 'slipway-orphans-'));
  roots.push(root);
  return root;
};

const orphansOf = async (blueprintId: number) =>
  (
    await db()
      .selectFrom('orphans')
      .select(['external_id', 'resource_id', 'slot', 'passes'])
      .where('blueprint_id', '=', blueprintId)
      .orderBy('external_id')
      .execute()
  ).map((o) => ({
    id: o.external_id,
    resourceId: o.resource_id === null ? null : Number(o.resource_id),
    ...(o.slot === null ? {} : { slot: o.slot }),
    passes: o.passes,
  }));
const destroyRequests = async (blueprintId: number) => (await commandsOf(db(), 'blueprint', blueprintId)).filter((c) => c.kind === 'destroy_orphan');
const exists = (dir: string) =>
  stat(dir).then(
    () => true,
    () => false,
  );

test('an orphan made by hand is reported in the first pass, and is not destroyed while its blueprint only reports', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'reporting', driver: 'simulated', maxResources: 1, settings: { holds: [{ id: 'vm-by-hand', attributes: { ip: '10.0.0.9' } }] } },
    operator,
  );
  expect((await hand.pass()).steps.findOrphans).toMatchObject({ found: 1, actions: [] });
  expect(await orphansOf(bp.id)).toEqual([{ id: 'vm-by-hand', resourceId: null, passes: 1 }]);

  // Seen again, still only reported: no command, the driver asked nothing.
  expect((await hand.pass()).steps.findOrphans).toMatchObject({ found: 1, actions: [] });
  expect(await orphansOf(bp.id)).toEqual([{ id: 'vm-by-hand', resourceId: null, passes: 2 }]);
  expect(await destroyRequests(bp.id)).toEqual([]);
  // The gauge the alert reads: seen again, so confirmed.
  const { orphans } = await readState(db(), { staleAfterMs: 60_000, heartbeatMs: 5000 });
  expect(orphans.filter((o) => o.blueprint === 'reporting')).toEqual([{ blueprint: 'reporting', seen: 'again', count: 1 }]);
});

test('a blueprint that destroys orphans has its driver remove one found unmatched in two passes, as system:gc with a reason', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'destroying', driver: 'simulated', maxResources: 1, orphans: 'destroy', settings: { holds: [{ id: 'vm-left-over' }] } },
    operator,
  );
  // The first pass only records it: one sighting is not enough to remove anything.
  expect((await hand.pass()).steps.findOrphans?.actions.filter((a) => a.target === `blueprint:${bp.id}`)).toEqual([]);
  // Nor two, while it was first seen within the grace.
  expect((await hand.pass({ orphanGraceMs: 3_600_000 })).steps.findOrphans?.actions.filter((a) => a.target === `blueprint:${bp.id}`)).toEqual([]);
  const second = await hand.pass();
  const asked = second.steps.findOrphans!.actions.filter((a) => a.target === `blueprint:${bp.id}`);
  expect(asked).toHaveLength(1);
  expect(asked[0]).toMatchObject({ kind: 'destroy_orphan' });
  // Asked once: a pass while the destroy is queued does not ask again.
  expect((await hand.pass()).steps.findOrphans!.actions.filter((a) => a.target === `blueprint:${bp.id}`)).toEqual([]);

  await hand.all();
  const [command] = await destroyRequests(bp.id);
  expect(command).toMatchObject({ status: 'done', issued_by: 'system:gc', source: 'gc', payload: { orphan: 'vm-left-over' } });
  expect(command!.reason).toMatch(/orphan "vm-left-over": listed by the simulated driver, no resource stands for it/);
  // Times in the one format people read (domain/times.ts), not ISO 8601.
  expect(command!.reason).toMatch(/ passes since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z, /);
  const effects = await db()
    .selectFrom('simulated_effects')
    .select(['calls'])
    .where('operation', '=', 'destroyOrphan')
    .where('object_id', '=', bp.id)
    .execute();
  expect(effects).toEqual([{ calls: 1 }]);
  // Removed from the report at once, and no longer listed by the next pass.
  expect(await orphansOf(bp.id)).toEqual([]);
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([]);
});

test('a destroy asked for something no longer recorded as an orphan leaves the driver alone', async () => {
  const bp = await createBlueprint(db(), { name: 'asked-by-hand', driver: 'simulated', maxResources: 1 }, operator);
  await appendCommand(db(), { target: { kind: 'blueprint', id: bp.id }, kind: 'destroy_orphan', payload: { orphan: 'vm-1' }, actor: operator });
  await hand.all();
  const [command] = await destroyRequests(bp.id);
  expect(command).toMatchObject({ status: 'done' });
  expect(command!.message).toMatch(/nothing removed: "vm-1" is not an orphan the collector records/);
  const effects = await db()
    .selectFrom('simulated_effects')
    .select('calls')
    .where('operation', '=', 'destroyOrphan')
    .where('object_id', '=', bp.id)
    .execute();
  expect(effects).toEqual([]);
});

test("the directory driver's resources are never orphans, not even while an allocate that made one has not committed; a directory made by hand is", async () => {
  const root = await tempRoot();
  const bp = await createBlueprint(db(), { name: 'dirs', driver: 'directory', maxResources: 2, orphans: 'destroy', settings: { root } }, operator);
  const { lease } = await createLease(db(), { blueprint: 'dirs', holder: 'h' }, operator);
  // The blueprint makes the resource (its row, pending, and its allocate) and nothing else yet.
  await hand.one('blueprint', bp.id);
  const pending = await db().selectFrom('resources').selectAll().where('blueprint_id', '=', bp.id).executeTakeFirstOrThrow();
  expect(pending.state).toBe('pending');
  // The driver's allocate has made the directory; its outcome is not committed (the worker died, or is slow).
  const driver = DirectoryDriver.create({ root }, { query: async () => ({ rows: [] }) });
  const call = {
    blueprint: { id: bp.id, name: bp.name, settings: { root }, labels: {} },
    idempotencyKey: `resource:${pending.id}:1`,
    commandId: 1,
    resource: { id: pending.id, capacity: 1, attributes: {} },
  };
  await driver.allocateResource(call);
  const handMade = path.join(root, 'dirs', 'copied-by-hand');
  await mkdir(handMade);

  for (let pass = 0; pass < 2; pass++) await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([{ id: handMade, resourceId: null, passes: 2 }]);

  // Its rows catch up: still not an orphan, and the lease is on it.
  await hand.all();
  expect((await db().selectFrom('leases').select('state').where('id', '=', lease.id).executeTakeFirstOrThrow()).state).toBe('active');
  await hand.pass();
  await hand.all();
  expect(await exists(path.join(root, 'dirs', `resource-${pending.id}`))).toBe(true);
  expect(await exists(handMade)).toBe(false);
  expect(await orphansOf(bp.id)).toEqual([]);
  expect((await destroyRequests(bp.id)).map((c) => c.payload)).toEqual([{ orphan: handMade }]);
});

test('a directory left behind by a destroyed resource is an orphan that names its resource; removed only once the blueprint says destroy', async () => {
  const root = await tempRoot();
  const bp = await createBlueprint(db(), { name: 'left-behind', driver: 'directory', maxResources: 1, settings: { root } }, operator);
  const { lease } = await createLease(db(), { blueprint: 'left-behind', holder: 'h' }, operator);
  await hand.all();
  const resource = await db().selectFrom('resources').selectAll().where('blueprint_id', '=', bp.id).executeTakeFirstOrThrow();
  await appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: operator });
  await appendCommand(db(), { target: { kind: 'resource', id: resource.id }, kind: 'release', actor: operator });
  await hand.all();
  expect((await db().selectFrom('resources').select('state').where('id', '=', resource.id).executeTakeFirstOrThrow()).state).toBe('destroyed');
  // Someone puts it back (a restore from backup, a lost commit of the destroy's effect).
  const dir = path.join(root, 'left-behind', `resource-${resource.id}`);
  await mkdir(dir);

  // Destroyed within the grace, it still accounts for its directory.
  await hand.pass({ orphanGraceMs: 3_600_000 });
  expect(await orphansOf(bp.id)).toEqual([]);
  for (let pass = 0; pass < 2; pass++) await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([{ id: dir, resourceId: resource.id, passes: 2 }]);
  await hand.all();
  expect(await exists(dir)).toBe(true);

  await updateBlueprint(db(), bp.id, { orphans: 'destroy' }, operator);
  await hand.pass();
  await hand.all();
  expect(await exists(dir)).toBe(false);
  expect(await orphansOf(bp.id)).toEqual([]);
});

test('a static-pool claim whose resource is gone is an orphan; destroying it frees its entry for a new resource', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'pool', driver: 'static-pool', maxResources: 1, orphans: 'destroy', settings: { entries: [{ name: 'host-a' }] } },
    operator,
  );
  // A claim whose resource's rows were lost (an asynchronous standby promoted before they reached it).
  await db()
    .insertInto('static_pool_claims')
    .values({ blueprint_id: bp.id, entry: 'host-a', resource_id: 999_999, definition: JSON.stringify({ name: 'host-a' }) })
    .execute();
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([{ id: 'host-a', resourceId: 999_999, passes: 1 }]);
  await hand.pass();
  await hand.all();
  expect(await db().selectFrom('static_pool_claims').selectAll().where('blueprint_id', '=', bp.id).execute()).toEqual([]);

  // The entry serves a lease again, and its new claim is no orphan.
  const { lease } = await createLease(db(), { blueprint: 'pool', holder: 'h' }, operator);
  await hand.all();
  expect((await db().selectFrom('leases').select('state').where('id', '=', lease.id).executeTakeFirstOrThrow()).state).toBe('active');
  await hand.pass();
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([]);
});

test('one matched by attributes alone is not destroyed while a resource of its blueprint is pending, whose attributes may yet match it', async () => {
  const bp = await createBlueprint(
    db(),
    {
      name: 'by-attributes',
      driver: 'simulated',
      maxResources: 1,
      orphans: 'destroy',
      settings: { holds: [{ id: 'vm-9', attributes: { ip: '10.0.0.9' } }] },
    },
    operator,
  );
  await createLease(db(), { blueprint: 'by-attributes', holder: 'h' }, operator);
  await hand.one('blueprint', bp.id);
  expect((await db().selectFrom('resources').select('state').where('blueprint_id', '=', bp.id).executeTakeFirstOrThrow()).state).toBe('pending');
  for (let pass = 0; pass < 3; pass++) await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([{ id: 'vm-9', resourceId: null, passes: 3 }]);
  expect(await destroyRequests(bp.id)).toEqual([]);

  // Allocated (with other attributes): the orphan is confirmed and asked for.
  await hand.all();
  await hand.pass();
  expect((await destroyRequests(bp.id)).map((c) => c.payload)).toEqual([{ orphan: 'vm-9' }]);
});

test("the exec driver's example program lists its workspaces and destroys an orphan, through the same collector and queue", async () => {
  const root = await tempRoot();
  const program = [process.execPath, WORKSPACE];
  const commands = {
    allocateResource: program,
    destroyResource: program,
    acquireLease: program,
    releaseLease: program,
    listResources: program,
    destroyOrphan: program,
  };
  const bp = await createBlueprint(
    db(),
    { name: 'workspaces', driver: 'exec', maxResources: 1, orphans: 'destroy', settings: { commands, params: { root } } },
    operator,
  );
  const { lease } = await createLease(db(), { blueprint: 'workspaces', holder: 'h' }, operator);
  await hand.all();
  const handMade = path.join(root, 'workspaces', 'copied-by-hand');
  await mkdir(handMade);
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([{ id: handMade, resourceId: null, passes: 1 }]);
  await hand.pass();
  await hand.all();
  expect(await exists(handMade)).toBe(false);
  const resource = await db().selectFrom('leases').select('resource_id').where('id', '=', lease.id).executeTakeFirstOrThrow();
  expect(await exists(path.join(root, 'workspaces', `resource-${resource.resource_id}`))).toBe(true);
  expect(await orphansOf(bp.id)).toEqual([]);
});

// Orphaned slots: a slot a driver holds on a live resource that no lease
// holds (its lease's rows lost), found and freed as orphans are, through the
// resource's queue.
const freeRequests = async (resourceId: number) => (await commandsOf(db(), 'resource', resourceId)).filter((c) => c.kind === 'destroy_orphan');
const resourceOf = async (blueprintId: number) =>
  db().selectFrom('resources').selectAll().where('blueprint_id', '=', blueprintId).orderBy('id').executeTakeFirstOrThrow();

test('an orphaned slot made by hand on a live resource is reported in the first pass, and freed through its resource only once the blueprint says destroy', async () => {
  const root = await tempRoot();
  const bp = await createBlueprint(db(), { name: 'slots', driver: 'directory', maxResources: 1, leasesPerResource: 3, settings: { root } }, operator);
  const { lease } = await createLease(db(), { blueprint: 'slots', holder: 'h' }, operator);
  await hand.all();
  const resource = await resourceOf(bp.id);
  const held = path.join(root, 'slots', `resource-${resource.id}`, 'slot-0');
  expect(await exists(held)).toBe(true);
  // A lease that had slot 2 was lost with its rows (a commit an asynchronous standby never got): its files stay.
  const lost = path.join(root, 'slots', `resource-${resource.id}`, 'slot-2');
  await mkdir(lost);
  await writeFile(path.join(lost, 'left-by-the-lost-lease'), 'x');

  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([{ id: lost, resourceId: resource.id, slot: 2, passes: 1 }]);
  // Reported through the same report as the blueprint's other orphans.
  const { orphans } = await readState(db(), { staleAfterMs: 60_000, heartbeatMs: 5000 });
  expect(orphans.filter((o) => o.blueprint === 'slots')).toEqual([{ blueprint: 'slots', seen: 'once', count: 1 }]);

  // Seen again while the blueprint only reports: left alone.
  await hand.pass();
  await hand.all();
  expect(await orphansOf(bp.id)).toEqual([{ id: lost, resourceId: resource.id, slot: 2, passes: 2 }]);
  expect(await freeRequests(resource.id)).toEqual([]);
  expect(await exists(lost)).toBe(true);

  await updateBlueprint(db(), bp.id, { orphans: 'destroy' }, operator);
  const asked = (await hand.pass()).steps.findOrphans!.actions.filter((a) => a.kind === 'destroy_orphan');
  expect(asked).toEqual([expect.objectContaining({ target: `resource:${resource.id}` })]);
  await hand.all();
  const [command] = await freeRequests(resource.id);
  expect(command).toMatchObject({ status: 'done', issued_by: 'system:gc', source: 'gc', payload: { orphan: lost } });
  expect(command!.reason).toMatch(
    /^orphaned slot 2 \(".*slot-2"\): listed by the directory driver on resource \d+, no lease holds it \(unmatched in 3 passes since /,
  );
  expect(await exists(lost)).toBe(false);
  // The lease's own slot, and the lease, are untouched.
  expect(await exists(held)).toBe(true);
  expect((await db().selectFrom('leases').select('state').where('id', '=', lease.id).executeTakeFirstOrThrow()).state).toBe('active');
  expect(await orphansOf(bp.id)).toEqual([]);
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([]);
});

test('a slot being acquired, held, or just released is never taken for an orphan; a slot granted again since it was found is left alone', async () => {
  const root = await tempRoot();
  const bp = await createBlueprint(
    db(),
    { name: 'slots-in-flight', driver: 'directory', maxResources: 1, leasesPerResource: 2, orphans: 'destroy', settings: { root } },
    operator,
  );
  const { lease } = await createLease(db(), { blueprint: 'slots-in-flight', holder: 'h' }, operator);
  await hand.one('blueprint', bp.id);
  const resource = await resourceOf(bp.id);
  // The resource is made and grants slot 0: its row is committed; the lease's grant (its driver call) is not applied yet.
  await hand.one('resource', resource.id);
  await hand.one('resource', resource.id);
  const granted = await db().selectFrom('resource_slots').selectAll().where('resource_id', '=', resource.id).execute();
  expect(granted).toEqual([expect.objectContaining({ slot: 0, lease_id: lease.id })]);
  // The grant's acquire has made the slot's directory; its outcome is not committed (the worker died, or is slow).
  const driver = DirectoryDriver.create({ root }, { query: async () => ({ rows: [] }) });
  const blueprint = { id: bp.id, name: bp.name, settings: { root }, labels: {} };
  await driver.acquireLease({
    blueprint,
    idempotencyKey: `lease:${lease.id}:1`,
    commandId: 1,
    lease: { id: lease.id, holder: 'h', attributes: {} },
    resource: { id: resource.id, attributes: {} },
    slot: 0,
  });
  const slot0 = path.join(root, 'slots-in-flight', `resource-${resource.id}`, 'slot-0');
  for (let pass = 0; pass < 2; pass++) await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([]);

  // Granted and held: still none.
  await hand.all();
  expect((await db().selectFrom('leases').select('state').where('id', '=', lease.id).executeTakeFirstOrThrow()).state).toBe('active');
  for (let pass = 0; pass < 2; pass++) await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([]);

  // Released: its slot's row is gone. A listing taken before the release's driver call still shows the directory
  // (put back here): the lease, destroyed within the grace, accounts for it.
  await appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: operator });
  await hand.all();
  expect(await exists(slot0)).toBe(false);
  await mkdir(slot0);
  for (let pass = 0; pass < 2; pass++) await hand.pass({ orphanGraceMs: 3_600_000 });
  expect(await orphansOf(bp.id)).toEqual([]);

  // Past the grace, nothing stands for it: an orphan. A new lease is sent to the resource for a slot, and the
  // next pass, which finds the slot unmatched again, asks for it to be freed: the resource grants the slot first
  // (its queue's order), and then leaves it alone.
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([{ id: slot0, resourceId: resource.id, slot: 0, passes: 1 }]);
  const next = await createLease(db(), { blueprint: 'slots-in-flight', holder: 'h2' }, operator);
  await hand.one('lease', next.lease.id);
  await hand.one('blueprint', bp.id);
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([{ id: slot0, resourceId: resource.id, slot: 0, passes: 2 }]);
  const queued = await db()
    .selectFrom('commands')
    .select('kind')
    .where('target_kind', '=', 'resource')
    .where('target_id', '=', resource.id)
    .where('status', '=', 'queued')
    .orderBy('id')
    .execute();
  expect(queued.map((c) => c.kind)).toEqual(['acquire', 'destroy_orphan']);
  await hand.all();
  const [command] = await freeRequests(resource.id);
  expect(command).toMatchObject({ status: 'done' });
  expect(command!.message).toMatch(/nothing removed: slot 0 is taken again \(by lease \d+\)/);
  expect(await exists(slot0)).toBe(true);
  expect((await db().selectFrom('leases').select('state').where('id', '=', next.lease.id).executeTakeFirstOrThrow()).state).toBe('active');
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([]);
});

test("an operator's destroy of an orphaned slot, asked of its blueprint, is handed on to the slot's resource, which frees it", async () => {
  const bp = await createBlueprint(db(), { name: 'held-slots', driver: 'simulated', maxResources: 1 }, operator);
  await createLease(db(), { blueprint: 'held-slots', holder: 'h' }, operator);
  await hand.all();
  const resource = await resourceOf(bp.id);
  // The simulated driver is told it holds slot 1 of the resource: a slot whose lease was lost.
  const settings = { holdsSlots: [{ resourceId: resource.id, slot: 1 }] };
  await appendCommand(db(), { target: { kind: 'blueprint', id: bp.id }, kind: 'update_settings', payload: { settings }, actor: operator });
  await hand.all();
  await hand.pass();
  const id = `resource-${resource.id}/slot-1`;
  expect(await orphansOf(bp.id)).toEqual([{ id, resourceId: resource.id, slot: 1, passes: 1 }]);

  await appendCommand(db(), { target: { kind: 'blueprint', id: bp.id }, kind: 'destroy_orphan', payload: { orphan: id }, actor: operator });
  await hand.all();
  const [asked] = await destroyRequests(bp.id);
  expect(asked).toMatchObject({ status: 'done', message: `orphan "${id}" is slot 1 of resource ${resource.id}: asked the resource to free it` });
  const [freed] = await freeRequests(resource.id);
  expect(freed).toMatchObject({ status: 'done', message: `orphaned slot 1 ("${id}") freed`, payload: { orphan: id } });
  const effects = await db()
    .selectFrom('simulated_effects')
    .select(['idempotency_key', 'calls'])
    .where('operation', '=', 'cleanSlot')
    .where('object_id', '=', resource.id)
    .execute();
  expect(effects).toEqual([{ idempotency_key: 'held-slot:1', calls: 1 }]);
  expect(await orphansOf(bp.id)).toEqual([]);
  await hand.pass();
  expect(await orphansOf(bp.id)).toEqual([]);
});
