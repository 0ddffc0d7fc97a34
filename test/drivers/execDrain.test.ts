import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import { loadConfig } from '../../src/config.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { MISBEHAVE, WORKSPACE } from './execFixtures.ts';

// The exec driver run by a real worker (graphile-worker, drains, real
// programs): each way a program can end is visible on the command that ran it.
const actor = { issuedBy: 'tester', source: 'cli' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let worker: SlipwayWorker;
let scratch: string;
const db = () => database.db;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'slipway-exec-drain-'));
  database = await createTestDatabase({ poolSize: 20 });
  worker = await SlipwayWorker.start(database, loadConfig({ DATABASE_URL: database.url }), testLog);
});
afterAll(async () => {
  await worker?.stop();
  await database?.drop();
  await rm(scratch, { recursive: true, force: true });
});

const EVIL = `alice'; touch pwned; echo "$(touch pwned2)" \`touch pwned3\` | rm -rf ~ #`;

async function execBlueprint(name: string, commands: Record<string, string[]>, extra: Record<string, unknown> = {}) {
  const settings = { commands, cwd: scratch, params: { root: path.join(scratch, 'workspaces') }, ...extra };
  return createBlueprint(db(), { name, driver: 'exec', settings, maxResources: 1, leasesPerResource: 2 }, actor);
}
const misbehave = (behaviour: string) => ['/bin/sh', MISBEHAVE, behaviour];
const workspace = [process.execPath, WORKSPACE];

const stateOf = async (kind: 'lease' | 'resource', id: number) =>
  await db()
    .selectFrom(kind === 'lease' ? 'leases' : 'resources')
    .select(['state', 'message'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
const commandOf = (kind: ObjectKind, id: number, commandKind: string): Promise<CommandRow | undefined> =>
  db()
    .selectFrom('commands')
    .selectAll()
    .where('target_kind', '=', kind)
    .where('target_id', '=', id)
    .where('kind', '=', commandKind)
    .orderBy('id')
    .executeTakeFirst();
const resourceMadeFor = (leaseId: number) =>
  waitFor(`a resource for lease ${leaseId}`, () =>
    db()
      .selectFrom('resources')
      .select('id')
      .where('allocated_for_lease_id', '=', leaseId)
      .executeTakeFirst()
      .then((r) => r?.id),
  );

async function releaseResource(id: number) {
  await appendCommand(db(), { target: { kind: 'resource', id }, kind: 'release', actor });
  await waitFor(`resource ${id} destroyed`, async () => (await stateOf('resource', id)).state === 'destroyed');
}

/** Gives up a lease still waiting and the resource stuck retrying for it, so its program stops being run. */
async function giveUp(leaseId: number, resourceId: number) {
  await appendCommand(db(), { target: { kind: 'lease', id: leaseId }, kind: 'release', actor });
  await waitFor(`lease ${leaseId} destroyed`, async () => (await stateOf('lease', leaseId)).state === 'destroyed');
  await releaseResource(resourceId);
}

describe('exec driver through a worker', () => {
  test('the example workspace: a lease gets a directory, the holder is written verbatim, release and destroy remove it', async () => {
    await execBlueprint('workspace', { allocateResource: workspace, destroyResource: workspace, acquireLease: workspace, releaseLease: workspace });
    const { lease } = await createLease(db(), { blueprint: 'workspace', holder: EVIL }, actor);
    await waitFor('the lease active', async () => (await stateOf('lease', lease.id)).state === 'active');

    const row = await db().selectFrom('leases').select(['attributes', 'resource_id', 'slot']).where('id', '=', lease.id).executeTakeFirstOrThrow();
    const resourceDir = path.join(scratch, 'workspaces', 'workspace', `resource-${row.resource_id}`);
    expect(row.attributes).toEqual({ path: path.join(resourceDir, `slot-${row.slot}`) });
    const written = JSON.parse(await readFile(path.join(resourceDir, `slot-${row.slot}`, '.slipway-lease.json'), 'utf8'));
    expect(written).toEqual({ lease: lease.id, holder: EVIL });
    for (const marker of ['pwned', 'pwned2', 'pwned3']) expect(existsSync(path.join(scratch, marker))).toBe(false);
    expect(await commandOf('lease', lease.id, 'grant')).toMatchObject({ status: 'done' });

    await appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'release', actor });
    await waitFor('the lease destroyed', async () => (await stateOf('lease', lease.id)).state === 'destroyed');
    expect(existsSync(path.join(resourceDir, `slot-${row.slot}`))).toBe(false);
    expect(existsSync(resourceDir)).toBe(true);
    await releaseResource(row.resource_id!);
    expect(existsSync(resourceDir)).toBe(false);
  });

  test('a program that fails: the command fails with its exit code and stderr; the lease breaks and says why', async () => {
    await execBlueprint('failing', { acquireLease: misbehave('fail') });
    const { lease } = await createLease(db(), { blueprint: 'failing', holder: 'bob' }, actor);
    await waitFor('the lease destroyed', async () => (await stateOf('lease', lease.id)).state === 'destroyed');
    const grant = await commandOf('lease', lease.id, 'grant');
    expect(grant).toMatchObject({ status: 'failed' });
    expect(grant!.message).toBe(
      'driver failed permanently: acquireLease: /bin/sh exited with code 3 (permanent failure); stderr: provisioning failed: flavour m5.huge does not exist',
    );
    expect((await stateOf('lease', lease.id)).message).toMatch(/exited with code 3 .*flavour m5.huge does not exist/);
  });

  test('a program printing invalid JSON: the command fails saying so; the resource breaks and its lease with it', async () => {
    await execBlueprint('garbled', { allocateResource: misbehave('garbage') });
    const { lease } = await createLease(db(), { blueprint: 'garbled', holder: 'carol' }, actor);
    const resourceId = await resourceMadeFor(lease.id);
    await waitFor('the lease destroyed', async () => (await stateOf('lease', lease.id)).state === 'destroyed');
    const allocate = await commandOf('resource', resourceId, 'allocate');
    expect(allocate).toMatchObject({ status: 'failed' });
    expect(allocate!.message).toBe(
      'driver failed permanently: allocateResource: /bin/sh printed invalid JSON on stdout: "this is not JSON\\n"; stderr: warming up...',
    );
    await waitFor('the resource destroyed', async () => (await stateOf('resource', resourceId)).state === 'destroyed');
    expect((await stateOf('lease', lease.id)).message).toMatch(/the resource allocated for it broke: .*printed invalid JSON/);
  });

  test('a transient exit code: the command stays queued and is retried, saying why', async () => {
    await execBlueprint('busy', { allocateResource: misbehave('busy') });
    const { lease } = await createLease(db(), { blueprint: 'busy', holder: 'dave' }, actor);
    const resourceId = await resourceMadeFor(lease.id);
    const retried = await waitFor('allocate retried', async () => {
      const allocate = await commandOf('resource', resourceId, 'allocate');
      return allocate && allocate.attempts >= 2 ? allocate : undefined;
    });
    expect(retried.status).toMatch(/queued|running/);
    expect(retried.message).toMatch(
      /^driver error \(attempt \d\), retrying in [\d.]+m?s: allocateResource: \/bin\/sh exited with code 75 \(transient failure\); stderr: quota exceeded; try again later$/,
    );
    const errors = await db()
      .selectFrom('events')
      .select('message')
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resourceId)
      .where('type', '=', 'driver_error')
      .execute();
    expect(errors.length).toBeGreaterThanOrEqual(2);
    expect((await stateOf('lease', lease.id)).state).toBe('pending');
    await giveUp(lease.id, resourceId);
  });

  test('a program that hangs: it is stopped at the timeout and the command is retried, saying so', async () => {
    await execBlueprint(
      'hanging',
      { allocateResource: misbehave('hang') },
      // Time for the shell to set its trap and say so on a loaded machine.
      { timeoutMs: 3000, killGraceMs: 200, env: { PID_FILE: path.join(scratch, 'hang.pids') } },
    );
    const { lease } = await createLease(db(), { blueprint: 'hanging', holder: 'erin' }, actor);
    const resourceId = await resourceMadeFor(lease.id);
    const timedOut = await waitFor('allocate timed out', async () => {
      const allocate = await commandOf('resource', resourceId, 'allocate');
      return allocate && allocate.attempts >= 1 ? allocate : undefined;
    });
    expect(timedOut.message).toMatch(
      /retrying in [\d.]+m?s: allocateResource: \/bin\/sh timed out after 3s and was stopped; stderr: hanging on purpose$/,
    );
    await giveUp(lease.id, resourceId);
    expect(await commandOf('resource', resourceId, 'allocate')).toMatchObject({ status: 'cancelled' });
  });
});

describe('exec driver: checks and cleanings through a worker', () => {
  test('cleaning between leases runs the cleanSlot program for the slot given back; a retry after a transient failure carries the same key', async () => {
    // Records each call's key and slot; the first call for a key fails as "try again later", the next succeeds.
    const program = path.join(scratch, 'clean.mjs');
    const log = path.join(scratch, 'clean.log');
    await writeFile(
      program,
      `import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
       let input = '';
       for await (const chunk of process.stdin) input += chunk;
       const call = JSON.parse(input);
       appendFileSync(${JSON.stringify(log)}, JSON.stringify({ key: call.idempotencyKey, env: process.env.SLIPWAY_IDEMPOTENCY_KEY, operation: call.operation, slot: call.slot, resource: call.resource.id }) + '\\n');
       const marker = ${JSON.stringify(scratch)} + '/cleaned-once-' + call.idempotencyKey.replaceAll(':', '-');
       if (!existsSync(marker)) { writeFileSync(marker, ''); process.exit(75); }`,
    );
    await createBlueprint(
      db(),
      {
        name: 'scrubbed',
        driver: 'exec',
        settings: { commands: { cleanSlot: [process.execPath, program] }, cwd: scratch },
        maxResources: 1,
        leasesPerResource: 1,
        cleanBetweenLeases: true,
        cleanAttempts: 3,
      },
      actor,
    );
    const { lease: first } = await createLease(db(), { blueprint: 'scrubbed', holder: 'first' }, actor);
    await waitFor('the first lease active', async () => (await stateOf('lease', first.id)).state === 'active');
    const { lease: second } = await createLease(db(), { blueprint: 'scrubbed', holder: 'second' }, actor);
    const { resource_id: resourceId } = await db().selectFrom('leases').select('resource_id').where('id', '=', first.id).executeTakeFirstOrThrow();

    await appendCommand(db(), { target: { kind: 'lease', id: first.id }, kind: 'release', actor });
    // The slot is cleaned (after one retry) before the waiting lease gets it.
    const clean = await waitFor('the cleaning settled', async () => {
      const command = await commandOf('resource', resourceId!, 'clean_slot');
      return command?.status === 'done' || command?.status === 'failed' ? command : undefined;
    });
    expect(clean).toMatchObject({ status: 'done', message: 'cleaned slot 0' });
    const key = `resource:${resourceId}:${clean.id}`;
    const calls = (await readFile(log, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(calls).toEqual([
      { key, env: key, operation: 'cleanSlot', slot: 0, resource: resourceId },
      { key, env: key, operation: 'cleanSlot', slot: 0, resource: resourceId },
    ]);
    await waitFor('the second lease active', async () => (await stateOf('lease', second.id)).state === 'active');
    const granted = await db().selectFrom('leases').select(['resource_id', 'slot']).where('id', '=', second.id).executeTakeFirstOrThrow();
    expect(granted).toEqual({ resource_id: resourceId, slot: 0 });
    const retried = await db().selectFrom('events').select('message').where('command_id', '=', clean.id).where('type', '=', 'driver_error').execute();
    expect(retried.map((e) => e.message)).toEqual([expect.stringMatching(/^cleanSlot: .* exited with code 75 \(transient failure\)$/)]);
  });

  test('a check whose program prints something unreadable quarantines the resource, saying the check failed; its lease carries on', async () => {
    await execBlueprint('unreadable', { checkResource: misbehave('garbage') });
    const { lease } = await createLease(db(), { blueprint: 'unreadable', holder: 'frank' }, actor);
    await waitFor('the lease active', async () => (await stateOf('lease', lease.id)).state === 'active');
    const { resource_id: resourceId } = await db().selectFrom('leases').select('resource_id').where('id', '=', lease.id).executeTakeFirstOrThrow();

    await appendCommand(db(), { target: { kind: 'resource', id: resourceId! }, kind: 'check', actor });
    const check = await waitFor('the check settled', async () => {
      const command = await commandOf('resource', resourceId!, 'check');
      return command?.status === 'done' || command?.status === 'failed' ? command : undefined;
    });
    const failure = 'the check failed: checkResource: /bin/sh printed invalid JSON on stdout: "this is not JSON\\n"; stderr: warming up...';
    expect(check).toMatchObject({ status: 'done', message: `unhealthy: ${failure}; quarantined: it takes no new leases` });
    const resource = await db()
      .selectFrom('resources')
      .select(['state', 'health', 'health_message', 'message'])
      .where('id', '=', resourceId!)
      .executeTakeFirstOrThrow();
    expect(resource).toEqual({ state: 'quarantined', health: 'unhealthy', health_message: failure, message: `unhealthy: ${failure}` });
    expect((await stateOf('lease', lease.id)).state).toBe('active');
  });
});
