import { expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { CommandRejectedError } from '../../src/domain/errors.ts';
import { handDrainedDatabase } from '../helpers/drainByHand.ts';
import { commandsOf } from '../helpers/objectHistory.ts';

// A resource's maintenance, drained by hand so that the order of the
// commands in its queue is the test's: a cordon applied while acquires the
// blueprint sent are still queued at the resource refuses them (it
// preempts them), and the leases go back to their blueprint, which sends
// none to a resource in maintenance.
const operator = { issuedBy: 'alice@host', source: 'cli', reason: 'disk check' } as const;
const { drain, db } = handDrainedDatabase({ poolSize: 6 });

const leaseStates = async (ids: readonly number[]) =>
  (await db().selectFrom('leases').select(['id', 'state']).where('id', 'in', ids).orderBy('id').execute()).map((l) => l.state);
const resourceOf = async (id: number) => db().selectFrom('resources').select(['state', 'used_slots']).where('id', '=', id).executeTakeFirstOrThrow();

test('a cordon applied while acquires wait in the resource queue refuses them; the leases wait at their blueprint until the uncordon', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'hand', driver: 'simulated', maxResources: 1, leasesPerResource: 3, settings: { latencyMs: { min: 0, max: 0 } } },
    operator,
  );
  const { lease: first } = await createLease(db(), { blueprint: 'hand', holder: 'first' }, operator);
  await drain().all();
  const { resource_id: resourceId } = await db().selectFrom('leases').select('resource_id').where('id', '=', first.id).executeTakeFirstOrThrow();
  expect((await resourceOf(resourceId!)).state).toBe('active');

  // Two more leases: the blueprint sends each an acquire to the resource, which is not drained yet.
  const later = [];
  for (const holder of ['second', 'third']) later.push((await createLease(db(), { blueprint: 'hand', holder }, operator)).lease);
  await drain().drain('blueprint', bp.id);
  const queuedAcquires = (await commandsOf(db(), 'resource', resourceId!)).filter((c) => c.kind === 'acquire' && c.status === 'queued');
  expect(queuedAcquires).toHaveLength(2);

  // The cordon, appended after them, is applied before them and they are refused.
  await appendCommand(db(), { target: { kind: 'resource', id: resourceId! }, kind: 'cordon', actor: operator });
  await drain().drain('resource', resourceId!);
  expect(await resourceOf(resourceId!)).toMatchObject({ state: 'maintenance', used_slots: 1 });
  const acquires = (await commandsOf(db(), 'resource', resourceId!)).filter((c) => queuedAcquires.some((q) => q.id === c.id));
  expect(acquires.map((c) => [c.status, c.message])).toEqual(later.map((l) => ['done', `refused lease ${l.id}: resource is maintenance`]));

  // Each refused lease asks its blueprint again after a short backoff
  // (RETRY_AFTER_DENY_MS, 200 ms), and joins its line: the one resource is
  // in maintenance and the blueprint may make no other.
  await drain().all();
  await new Promise((resolve) => setTimeout(resolve, 300));
  await drain().all();
  expect(await leaseStates(later.map((l) => l.id))).toEqual(['pending', 'pending']);
  const line = await db().selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', bp.id).orderBy('lease_id').execute();
  expect(line.map((w) => w.lease_id)).toEqual(later.map((l) => l.id));
  expect((await resourceOf(resourceId!)).used_slots).toBe(1);

  // A second cordon is refused before it is queued: the state table takes none in maintenance.
  await expect(appendCommand(db(), { target: { kind: 'resource', id: resourceId! }, kind: 'cordon', actor: operator })).rejects.toThrow(
    CommandRejectedError,
  );

  // Uncordoned, the resource offers its free slots, and both waiting leases get one.
  await appendCommand(db(), { target: { kind: 'resource', id: resourceId! }, kind: 'uncordon', actor: operator });
  await drain().all();
  expect(await resourceOf(resourceId!)).toMatchObject({ state: 'active', used_slots: 3 });
  expect(await leaseStates(later.map((l) => l.id))).toEqual(['active', 'active']);
});

test('a resource in maintenance waits when empty, and retire then destroys it', async () => {
  await createBlueprint(
    db(),
    { name: 'retiring', driver: 'simulated', maxResources: 1, leasesPerResource: 1, settings: { latencyMs: { min: 0, max: 0 } } },
    operator,
  );
  const { lease } = await createLease(db(), { blueprint: 'retiring', holder: 'h' }, operator);
  await drain().all();
  const { resource_id: resourceId } = await db().selectFrom('leases').select('resource_id').where('id', '=', lease.id).executeTakeFirstOrThrow();
  await appendCommand(db(), { target: { kind: 'resource', id: resourceId! }, kind: 'cordon', actor: operator });
  await appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: operator });
  await drain().all();
  expect(await resourceOf(resourceId!)).toMatchObject({ state: 'maintenance', used_slots: 0 });

  await appendCommand(db(), { target: { kind: 'resource', id: resourceId! }, kind: 'retire', actor: operator });
  await drain().all();
  expect((await resourceOf(resourceId!)).state).toBe('destroyed');
});
