import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { withTransaction } from '../../src/db/withTransaction.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { updateBlueprint } from '../../src/objects/updateBlueprint.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { commandsOf } from '../helpers/objectHistory.ts';
import { handDrainSuite } from './support/handDrain.ts';

// The observe loop (the collector asks each resource of a blueprint with a
// check interval to `check`), what a check's answer does (gone breaks the
// resource and its leases and the blueprint makes another; unhealthy
// quarantines it until repaired), and that a healthy resource checked over
// and over records one health event. Drain and collector run by hand.
const operator = { issuedBy: 'alice@host', source: 'cli', reason: 'looking' } as const;
const { db, hand } = handDrainSuite();

const resourceOf = (id: number) => db().selectFrom('resources').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const leaseOf = (id: number) => db().selectFrom('leases').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const ask = (kind: string, id: number, payload?: unknown) =>
  appendCommand(db(), { target: { kind: 'resource', id }, kind, actor: operator, payload });
const healthEvents = async (id: number) =>
  (
    await db()
      .selectFrom('events')
      .select('message')
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', id)
      .where('type', '=', 'health')
      .orderBy('id')
      .execute()
  ).map((e) => e.message);

async function activeLease(blueprint: string, holder: string): Promise<{ leaseId: number; resourceId: number }> {
  const { lease } = await createLease(db(), { blueprint, holder }, operator);
  await hand.all();
  const row = await leaseOf(lease.id);
  expect(row.state).toBe('active');
  return { leaseId: lease.id, resourceId: row.resource_id! };
}

test('the collector asks for checks only on blueprints with an interval, and not twice while one is on its way', async () => {
  await createBlueprint(db(), { name: 'watched', driver: 'simulated', maxResources: 2, checkIntervalMs: 60_000 }, operator);
  await createBlueprint(db(), { name: 'trusted', driver: 'simulated', maxResources: 2 }, operator);
  const watched = await activeLease('watched', 'w');
  const trusted = await activeLease('trusted', 't');

  const first = await hand.pass();
  const asked = (first.steps.checkResources?.actions ?? []).map((a) => a.target);
  expect(asked).toContain(`resource:${watched.resourceId}`);
  expect(asked).not.toContain(`resource:${trusted.resourceId}`);
  expect((await hand.pass()).steps.checkResources?.actions.map((a) => a.target)).not.toContain(`resource:${watched.resourceId}`);

  // Checked: healthy, recorded once; not due again within the interval.
  await hand.all();
  expect(await resourceOf(watched.resourceId)).toMatchObject({ state: 'active', health: 'healthy', health_message: null });
  expect((await resourceOf(watched.resourceId)).checked_at).not.toBeNull();
  expect((await hand.pass()).steps.checkResources?.actions.map((a) => a.target)).not.toContain(`resource:${watched.resourceId}`);

  // Asked again and again, a healthy resource adds no event, only a newer checked_at.
  const before = (await resourceOf(watched.resourceId)).checked_at!;
  for (let i = 0; i < 3; i++) {
    await ask('check', watched.resourceId);
    await hand.all();
  }
  expect(await healthEvents(watched.resourceId)).toEqual(['healthy']);
  expect((await resourceOf(watched.resourceId)).checked_at!.getTime()).toBeGreaterThan(before.getTime());
});

test("the collector's checks that changed nothing leave one row per resource; a check that changed something stays, with its event", async () => {
  const bp = await createBlueprint(db(), { name: 'compact', driver: 'simulated', maxResources: 1, checkIntervalMs: 1000 }, operator);
  const { resourceId } = await activeLease('compact', 'c');
  const collectorChecks = async () =>
    (await commandsOf(db(), 'resource', resourceId)).filter((c) => c.kind === 'check').map((c) => `${c.issued_by} ${c.source} ${c.message}`);
  /** One pass and its checks drained, as if the interval had gone by since the last check. */
  const round = async () => {
    await db()
      .updateTable('resources')
      .set({ checked_at: new Date(Date.now() - 60_000) })
      .where('id', '=', resourceId)
      .execute();
    await hand.pass();
    await hand.all();
  };
  for (let i = 0; i < 3; i++) await round();
  // The first answer changed something (never checked → healthy) and stays; of the rest, only the latest.
  expect(await collectorChecks()).toEqual(['system:health gc healthy', 'system:health gc healthy']);

  // Unhealthy: that check changed something and stays, with its event; the unchanged ones after it go as before.
  await appendCommand(db(), {
    target: { kind: 'blueprint', id: bp.id },
    kind: 'update_settings',
    payload: { settings: { checks: { unhealthy: [resourceId] } } },
    actor: operator,
  });
  await hand.all();
  for (let i = 0; i < 3; i++) await round();
  expect(await collectorChecks()).toEqual([
    'system:health gc healthy',
    `system:health gc unhealthy: simulated: resource ${resourceId} is unhealthy; quarantined: it takes no new leases`,
    `system:health gc still unhealthy: simulated: resource ${resourceId} is unhealthy`,
  ]);
});

test('a resource whose directory vanished under an active lease is found gone: the lease is broken with the reason, and the blueprint makes another', async () => {
  const root = await mkdtemp(path.join(tmpdir(), 'slipway-health-'));
  try {
    const bp = await createBlueprint(
      db(),
      { name: 'dirs', driver: 'directory', maxResources: 1, leasesPerResource: 2, settings: { root } },
      operator,
    );
    const { leaseId, resourceId } = await activeLease('dirs', 'holder');
    await rm(path.join(root, 'dirs', `resource-${resourceId}`), { recursive: true });

    await ask('check', resourceId);
    await hand.all();
    const resource = await resourceOf(resourceId);
    expect(resource).toMatchObject({ state: 'destroyed', health: 'gone' });
    expect(resource.health_message).toMatch(/resource-\d+ does not exist$/);
    const lease = await leaseOf(leaseId);
    expect(lease.state).toBe('destroyed');
    expect(lease.message).toMatch(new RegExp(`^resource ${resourceId} is gone: /.*resource-${resourceId} does not exist$`));
    // Its slot was given back and nothing was granted on it after the check.
    expect(await db().selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resourceId).execute()).toEqual([]);
    const granted = await db()
      .selectFrom('events')
      .select('id')
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resourceId)
      .where('type', '=', 'slot_granted')
      .execute();
    expect(granted).toHaveLength(1);

    // The blueprint counted it out: a new lease gets a new resource.
    expect((await db().selectFrom('blueprints').select('live_resources').where('id', '=', bp.id).executeTakeFirstOrThrow()).live_resources).toBe(0);
    const next = await activeLease('dirs', 'next');
    expect(next.resourceId).not.toBe(resourceId);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('an unhealthy resource is quarantined: its lease carries on, nothing new lands on it, and repair puts it back once it is healthy', async () => {
  await createBlueprint(db(), { name: 'flaky', driver: 'simulated', maxResources: 1, leasesPerResource: 2 }, operator);
  const bp = await db().selectFrom('blueprints').select('id').where('name', '=', 'flaky').executeTakeFirstOrThrow();
  const { leaseId, resourceId } = await activeLease('flaky', 'first');
  const settingsWith = async (checks: Record<string, unknown>) => {
    await appendCommand(db(), {
      target: { kind: 'blueprint', id: bp.id },
      kind: 'update_settings',
      payload: { settings: { checks } },
      actor: operator,
    });
    await hand.all();
  };
  await settingsWith({ unhealthy: [resourceId] });

  await ask('check', resourceId);
  await hand.all();
  expect(await resourceOf(resourceId)).toMatchObject({
    state: 'quarantined',
    health: 'unhealthy',
    message: `unhealthy: simulated: resource ${resourceId} is unhealthy`,
  });
  expect((await leaseOf(leaseId)).state).toBe('active');

  // A new lease waits: the one resource is quarantined and the blueprint may make no other.
  const { lease: waiting } = await createLease(db(), { blueprint: 'flaky', holder: 'second' }, operator);
  await hand.all();
  expect((await leaseOf(waiting.id)).state).toBe('pending');

  // Still unhealthy: the repair fails and it stays quarantined.
  const stillBad = await ask('repair', resourceId);
  await hand.all();
  const repair = (await commandsOf(db(), 'resource', resourceId)).find((c) => c.id === stillBad.command.id)!;
  expect(repair).toMatchObject({ status: 'failed', message: `still unhealthy: simulated: resource ${resourceId} is unhealthy` });
  expect((await resourceOf(resourceId)).state).toBe('quarantined');

  // Healthy again: a plain check leaves it quarantined, a repair puts it back and the waiting lease gets its slot.
  await settingsWith({});
  await ask('check', resourceId);
  await hand.all();
  expect(await resourceOf(resourceId)).toMatchObject({ state: 'quarantined', health: 'healthy' });
  await ask('repair', resourceId);
  await hand.all();
  expect(await resourceOf(resourceId)).toMatchObject({ state: 'active', health: 'healthy', message: null, used_slots: 2 });
  expect((await leaseOf(waiting.id)).state).toBe('active');
  expect(await healthEvents(resourceId)).toEqual([`unhealthy: simulated: resource ${resourceId} is unhealthy`, 'healthy']);
});

test('check intervals are set at creation and changed or turned off with the limits', async () => {
  const created = await createBlueprint(db(), { name: 'interval', driver: 'simulated', maxResources: 1, checkIntervalMs: 30_000 }, operator);
  expect(created.check_interval_ms).toBe(30_000);
  const changed = await withTransaction(db(), (trx) => updateBlueprint(trx, 'interval', { checkIntervalMs: null }, operator));
  expect(changed.check_interval_ms).toBeNull();
  await expect(createBlueprint(db(), { name: 'too-often', driver: 'simulated', maxResources: 1, checkIntervalMs: 10 }, operator)).rejects.toThrow(
    /checkIntervalMs: expected at least 1 s/,
  );
});

test('with cleaning between leases, a slot is cleaned before it is granted again; failed cleanings quarantine the resource, and repair cleans it', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'clean', driver: 'simulated', maxResources: 1, leasesPerResource: 1, cleanBetweenLeases: true, cleanAttempts: 2 },
    operator,
  );
  const settingsWith = async (settings: Record<string, unknown>) => {
    await appendCommand(db(), { target: { kind: 'blueprint', id: bp.id }, kind: 'update_settings', payload: { settings }, actor: operator });
    await hand.all();
  };
  const first = await activeLease('clean', 'first');
  const { lease: second } = await createLease(db(), { blueprint: 'clean', holder: 'second' }, operator);
  await hand.all();
  expect((await leaseOf(second.id)).state).toBe('pending');

  // Released: the slot is cleaned, then granted to the waiting lease.
  await appendCommand(db(), { target: { kind: 'lease', id: first.leaseId }, kind: 'release', actor: operator });
  await hand.all();
  expect((await leaseOf(second.id)).state).toBe('active');
  const slotEvents = async () =>
    (
      await db()
        .selectFrom('events')
        .select(['type', 'message'])
        .where('target_kind', '=', 'resource')
        .where('target_id', '=', first.resourceId)
        .where('type', 'in', ['slot_granted', 'slot_freed', 'slot_cleaned', 'cleaning_failed'])
        .orderBy('id')
        .execute()
    ).map((e) => `${e.type}: ${e.message}`);
  expect(await slotEvents()).toEqual([
    `slot_granted: slot 0 to lease ${first.leaseId}`,
    `slot_freed: slot 0 from lease ${first.leaseId}, to be cleaned`,
    'slot_cleaned: slot 0',
    `slot_granted: slot 0 to lease ${second.id}`,
  ]);
  const cleanings = await db()
    .selectFrom('simulated_effects')
    .select('calls')
    .where('operation', '=', 'cleanSlot')
    .where('object_id', '=', first.resourceId)
    .execute();
  expect(cleanings).toHaveLength(1);

  // Cleaning fails: retried once after its backoff, then the resource is quarantined with the slot still dirty.
  await settingsWith({ failOperations: ['cleanSlot'], transientFailureRate: 1 });
  const { lease: third } = await createLease(db(), { blueprint: 'clean', holder: 'third' }, operator);
  await appendCommand(db(), { target: { kind: 'lease', id: second.id }, kind: 'release', actor: operator });
  await hand.all();
  expect((await resourceOf(first.resourceId)).state).toBe('active');
  await new Promise((resolve) => setTimeout(resolve, 700)); // the first retry's backoff (0.5 s)
  await hand.all();
  const quarantined = await resourceOf(first.resourceId);
  expect(quarantined).toMatchObject({ state: 'quarantined', used_slots: 1 });
  expect(quarantined.message).toMatch(/^cleaning slot 0 failed 2 time\(s\): simulated transient failure in cleanSlot$/);
  // Slipway quarantined it, not the operator whose release led to the cleaning: the event names Slipway's part, and its command links the cause.
  const quarantine = await db()
    .selectFrom('events')
    .innerJoin('commands as c', 'c.id', 'events.command_id')
    .innerJoin('commands as cause', 'cause.id', 'c.caused_by')
    .select(['events.actor', 'events.source', 'c.kind', 'c.issued_by', 'cause.kind as causeKind', 'cause.issued_by as causeIssuedBy'])
    .where('events.target_kind', '=', 'resource')
    .where('events.target_id', '=', first.resourceId)
    .where('events.to_state', '=', 'quarantined')
    .executeTakeFirstOrThrow();
  expect(quarantine).toEqual({
    actor: 'system:resource',
    source: 'system',
    kind: 'clean_slot',
    issued_by: 'system:resource',
    causeKind: 'release_slot',
    causeIssuedBy: 'system:lease',
  });
  expect((await leaseOf(third.id)).state).toBe('pending');
  expect(await db().selectFrom('resource_slots').select(['slot', 'lease_id']).where('resource_id', '=', first.resourceId).execute()).toEqual([
    { slot: 0, lease_id: null },
  ]);

  // Repaired once the driver cleans again: the slot is cleaned, the resource serves the waiting lease.
  await settingsWith({});
  await ask('repair', first.resourceId);
  await hand.all();
  expect(await resourceOf(first.resourceId)).toMatchObject({ state: 'active', used_slots: 1 });
  expect((await leaseOf(third.id)).state).toBe('active');
});

test('a resource retired while a slot waits to be cleaned is destroyed: the slot is not cleaned for nobody', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'going', driver: 'simulated', maxResources: 1, leasesPerResource: 2, cleanBetweenLeases: true, cleanAttempts: 5 },
    operator,
  );
  await appendCommand(db(), {
    target: { kind: 'blueprint', id: bp.id },
    kind: 'update_settings',
    payload: { settings: { failOperations: ['cleanSlot'], transientFailureRate: 1, transientRetryAfterMs: 60_000 } },
    actor: operator,
  });
  await hand.all();
  const { leaseId, resourceId } = await activeLease('going', 'only');
  await appendCommand(db(), { target: { kind: 'lease', id: leaseId }, kind: 'release', actor: operator });
  await hand.all();
  expect(await db().selectFrom('resource_slots').select('lease_id').where('resource_id', '=', resourceId).execute()).toEqual([{ lease_id: null }]);

  await ask('retire', resourceId);
  await hand.all();
  expect(await resourceOf(resourceId)).toMatchObject({ state: 'destroyed', used_slots: 0 });
  expect(await db().selectFrom('resource_slots').select('slot').where('resource_id', '=', resourceId).execute()).toEqual([]);
});

test("a static pool's probe program checks each entry's resource: the entry it finds down is quarantined, the other stays", async () => {
  // The probe reads the call on stdin, as an exec driver's program does: the entry's name is in the resource's attributes.
  const probe = `let s = ''; process.stdin.on('data', (d) => (s += d)).on('end', () => {
    const call = JSON.parse(s);
    if (call.resource.attributes.entry === 'b') console.log(JSON.stringify({ health: 'unhealthy', message: 'b is down' }));
  });`;
  await createBlueprint(
    db(),
    {
      name: 'hosts',
      driver: 'static-pool',
      maxResources: 2,
      settings: { probe: { command: [process.execPath, '-e', probe] }, entries: [{ name: 'a' }, { name: 'b' }] },
    },
    operator,
  );
  const one = await activeLease('hosts', 'one');
  const two = await activeLease('hosts', 'two');
  for (const { resourceId } of [one, two]) await ask('check', resourceId);
  await hand.all();
  const byEntry = async ({ resourceId }: { resourceId: number }) => {
    const r = await resourceOf(resourceId);
    return { entry: (r.attributes as { entry: string }).entry, state: r.state, health: r.health, message: r.health_message };
  };
  expect([await byEntry(one), await byEntry(two)].sort((x, y) => x.entry.localeCompare(y.entry))).toEqual([
    { entry: 'a', state: 'active', health: 'healthy', message: null },
    { entry: 'b', state: 'quarantined', health: 'unhealthy', message: 'b is down' },
  ]);
});

/** A resource's states from its events, created first, as the state table moved it. */
const stateTrail = async (id: number) =>
  (
    await db()
      .selectFrom('events')
      .select(['type', 'from_state', 'to_state'])
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', id)
      .where('type', 'in', ['created', 'state'])
      .orderBy('id')
      .execute()
  ).map((e) => e.to_state);

test('a quarantined resource released by an operator: its lease is released (not broken), its dirty slot forgotten, and it is destroyed; the lease waiting gets a new one', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'condemned', driver: 'simulated', maxResources: 1, leasesPerResource: 2, cleanBetweenLeases: true, cleanAttempts: 3 },
    operator,
  );
  await appendCommand(db(), {
    target: { kind: 'blueprint', id: bp.id },
    kind: 'update_settings',
    payload: { settings: { failOperations: ['cleanSlot'], permanentFailureRate: 1 } },
    actor: operator,
  });
  await hand.all();
  const first = await activeLease('condemned', 'first');
  const second = await activeLease('condemned', 'second');
  expect(second.resourceId).toBe(first.resourceId);
  const resourceId = first.resourceId;

  // The first lease's slot cannot be cleaned: the resource is quarantined with that slot dirty, the second lease carries on.
  await appendCommand(db(), { target: { kind: 'lease', id: first.leaseId }, kind: 'release', actor: operator });
  await hand.all();
  expect(await resourceOf(resourceId)).toMatchObject({
    state: 'quarantined',
    used_slots: 2,
    message: 'cleaning slot 0 failed for good: simulated permanent failure in cleanSlot',
  });
  expect((await leaseOf(second.leaseId)).state).toBe('active');
  const { lease: waiting } = await createLease(db(), { blueprint: 'condemned', holder: 'waiting' }, operator);
  await hand.all();
  expect((await leaseOf(waiting.id)).state).toBe('pending');

  // Released by an operator: the state table takes it from quarantined to released, and on to destroyed once its lease is gone.
  const released = await appendCommand(db(), {
    target: { kind: 'resource', id: resourceId },
    kind: 'release',
    actor: { ...operator, reason: 'the disk is failing' },
  });
  await hand.all();
  const release = (await commandsOf(db(), 'resource', resourceId)).find((c) => c.id === released.command.id)!;
  expect(release).toMatchObject({ status: 'done', message: 'released; releasing its 1 lease(s) first' });
  expect(await resourceOf(resourceId)).toMatchObject({ state: 'destroyed', used_slots: 0 });
  expect(await stateTrail(resourceId)).toEqual(['pending', 'active', 'quarantined', 'released', 'destroyed']);
  expect(await db().selectFrom('resource_slots').select('slot').where('resource_id', '=', resourceId).execute()).toEqual([]);
  // No cleaning was tried again for a resource going away.
  expect((await commandsOf(db(), 'resource', resourceId)).filter((c) => c.kind === 'clean_slot').map((c) => c.status)).toEqual(['failed']);

  // Its lease was released as a lease is, told why, not broken.
  const lease = await leaseOf(second.leaseId);
  expect(lease.state).toBe('destroyed');
  const leaseStates = (
    await db()
      .selectFrom('events')
      .select('to_state')
      .where('target_kind', '=', 'lease')
      .where('target_id', '=', second.leaseId)
      .where('type', 'in', ['created', 'state'])
      .orderBy('id')
      .execute()
  ).map((e) => e.to_state);
  expect(leaseStates).toEqual(['pending', 'acquired', 'active', 'released', 'destroyed']);
  const leaseRelease = (await commandsOf(db(), 'lease', second.leaseId)).find((c) => c.kind === 'release')!;
  expect(leaseRelease).toMatchObject({ status: 'done', reason: `resource ${resourceId} is being released`, caused_by: released.command.id });

  // The blueprint counted it out and made another resource for the lease that was waiting.
  const served = await leaseOf(waiting.id);
  expect(served.state).toBe('active');
  expect(served.resource_id).not.toBe(resourceId);
});

test('a warm resource found gone by a check is destroyed, and the blueprint tops itself up to its warm minimum as it counts it out, with no collector pass', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'kept-warm', driver: 'simulated', maxResources: 1, minResources: 1, checkIntervalMs: 60_000 },
    operator,
  );
  const warm = () => db().selectFrom('resources').select(['id', 'state']).where('blueprint_id', '=', bp.id).where('state', '=', 'active').execute();
  await hand.pass();
  await hand.all();
  const [made] = await warm();
  expect(made).toBeDefined();

  await appendCommand(db(), {
    target: { kind: 'blueprint', id: bp.id },
    kind: 'update_settings',
    payload: { settings: { checks: { gone: [made!.id] } } },
    actor: operator,
  });
  await hand.all();
  // The collector's check finds it gone: it is destroyed and the blueprint counts it out.
  const checked = await hand.pass();
  expect(checked.steps.checkResources?.actions.map((a) => a.target)).toContain(`resource:${made!.id}`);
  // Drained to the end: the resource is destroyed, the blueprint counts it
  // out and, below its minimum, asks itself to top up, in the same drains.
  await hand.all();
  expect(await resourceOf(made!.id)).toMatchObject({ state: 'destroyed', health: 'gone' });
  const replaced = await warm();
  expect(replaced).toHaveLength(1);
  expect(replaced[0]!.id).not.toBe(made!.id);
  const topUp = (await commandsOf(db(), 'blueprint', bp.id)).filter((c) => c.kind === 'top_up').at(-1);
  expect(topUp).toMatchObject({ issued_by: 'system:blueprint', status: 'done', reason: `resource ${made!.id} gone: 0 live of a warm minimum of 1` });
  // The collector has nothing left to do for it.
  expect((await hand.pass()).steps.topUpWarmMinimum?.actions).toEqual([]);
});
