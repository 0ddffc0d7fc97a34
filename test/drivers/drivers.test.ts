import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { InvalidInputError } from '../../src/domain/errors.ts';
import { DirectoryDriver } from '../../src/drivers/DirectoryDriver.ts';
import { type Driver, type LeaseCall, PermanentDriverError, type ResourceCall, TransientDriverError } from '../../src/drivers/Driver.ts';
import { DriverRegistry, validateDriverSettings } from '../../src/drivers/registry.ts';
import { SimulatedDriver } from '../../src/drivers/SimulatedDriver.ts';
import { validatingDriver } from '../../src/drivers/validatingDriver.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

const blueprint = { id: 1, name: 'workspaces', settings: {}, labels: {} };
const resourceCall = (commandId: number): ResourceCall => ({
  blueprint,
  idempotencyKey: `resource:5:${commandId}`,
  commandId,
  resource: { id: 5, capacity: 2, attributes: {} },
});
const leaseCall = (commandId: number, slot = 1): LeaseCall => ({
  blueprint,
  idempotencyKey: `lease:9:${commandId}`,
  commandId,
  lease: { id: 9, holder: 'alice', attributes: {} },
  resource: { id: 5, attributes: {} },
  slot,
});
const noServices = { query: async () => undefined };

describe('directory driver', () => {
  let root: string;
  let driver: Driver;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'slipway-dir-'));
    driver = DirectoryDriver.create({ root }, noServices);
  });
  afterAll(async () => rm(root, { recursive: true, force: true }));

  test('a resource is a directory, a lease one of its slots; release cleans the lease files, destroy removes it all', async () => {
    const resourceDir = path.join(root, 'workspaces', 'resource-5');
    const allocated = await driver.allocateResource(resourceCall(1));
    expect(allocated.attributes).toEqual({ path: resourceDir });
    await driver.activateResource(resourceCall(2));
    const acquired = await driver.acquireLease(leaseCall(3));
    const slotDir = path.join(resourceDir, 'slot-1');
    expect(acquired.attributes).toEqual({ path: slotDir });
    await driver.activateLease(leaseCall(4));
    await writeFile(path.join(slotDir, 'build.log'), 'the lease wrote this');
    expect((await readdir(slotDir)).sort()).toEqual(['.slipway-lease.json', 'build.log']);

    await driver.releaseLease(leaseCall(5));
    expect(existsSync(slotDir)).toBe(false);
    expect(existsSync(resourceDir)).toBe(true);
    await driver.destroyResource(resourceCall(6));
    expect(existsSync(resourceDir)).toBe(false);
  });

  test('every step can be repeated (calls are at least once)', async () => {
    for (let i = 0; i < 2; i++) await driver.allocateResource(resourceCall(1));
    for (let i = 0; i < 2; i++) await driver.acquireLease(leaseCall(3, 0));
    for (let i = 0; i < 2; i++) await driver.releaseLease(leaseCall(5, 0));
    for (let i = 0; i < 2; i++) await driver.destroyResource(resourceCall(6));
    expect(existsSync(path.join(root, 'workspaces', 'resource-5'))).toBe(false);
  });

  test("cleanSlot empties the slot's directory (whatever a lease left in it), leaves the other slots alone, and can be repeated", async () => {
    const resourceDir = path.join(root, 'workspaces', 'resource-5');
    await driver.allocateResource(resourceCall(40));
    for (const slot of [0, 1]) {
      await driver.acquireLease(leaseCall(41 + slot, slot));
      await driver.activateLease(leaseCall(43 + slot, slot));
    }
    // Files left in slot 1, even in a subdirectory, after its lease's release (written late, by a process it left behind).
    await driver.releaseLease(leaseCall(45, 1));
    await mkdir(path.join(resourceDir, 'slot-1', 'cache'), { recursive: true });
    await writeFile(path.join(resourceDir, 'slot-1', 'cache', 'late.log'), 'written after the release');
    const slotCall = { ...resourceCall(46), slot: 1 };
    for (let i = 0; i < 2; i++) await expect(driver.cleanSlot!(slotCall)).resolves.toEqual({});
    expect(existsSync(path.join(resourceDir, 'slot-1'))).toBe(false);
    expect(await readdir(path.join(resourceDir, 'slot-0'))).toEqual(['.slipway-lease.json']);
    expect(existsSync(resourceDir)).toBe(true);
    await driver.destroyResource(resourceCall(47));
  });

  test('checkResource: healthy while the resource has its directory, gone once it does not', async () => {
    const resourceDir = path.join(root, 'workspaces', 'resource-5');
    await driver.allocateResource(resourceCall(50));
    await expect(driver.checkResource!(resourceCall(51))).resolves.toEqual({ health: 'healthy' });
    await rm(resourceDir, { recursive: true });
    await expect(driver.checkResource!(resourceCall(52))).resolves.toEqual({ health: 'gone', message: `${resourceDir} does not exist` });
    await writeFile(resourceDir, 'a file where the directory was');
    await expect(driver.checkResource!(resourceCall(53))).resolves.toEqual({ health: 'gone', message: `${resourceDir} is not a directory` });
    await rm(resourceDir);
  });

  test("listSlots lists a resource's slot directories, whoever made them, and nothing else; none for a resource with no directory", async () => {
    const resourceDir = path.join(root, 'workspaces', 'resource-5');
    const listCall = { blueprint, resource: resourceCall(60).resource };
    await expect(driver.listSlots!(listCall)).resolves.toEqual({ slots: [] });
    await driver.allocateResource(resourceCall(60));
    await driver.activateResource(resourceCall(61));
    await driver.acquireLease(leaseCall(62, 0));
    // Made by hand, or by a lease whose rows were lost; and things that are not slots.
    await mkdir(path.join(resourceDir, 'slot-12'));
    await mkdir(path.join(resourceDir, 'slot-01'));
    await writeFile(path.join(resourceDir, 'notes.txt'), 'not a slot');
    await expect(driver.listSlots!(listCall)).resolves.toEqual({
      slots: [
        { id: path.join(resourceDir, 'slot-0'), slot: 0 },
        { id: path.join(resourceDir, 'slot-12'), slot: 12 },
      ],
    });
    await driver.destroyResource(resourceCall(63));
  });

  test('settings are validated with a message naming the field', () => {
    expect(() => validateDriverSettings('directory', {})).toThrow(/invalid settings for the directory driver: settings.root/);
    expect(() => validateDriverSettings('directory', { root: '/tmp/x', extra: 1 })).toThrow(/Unrecognized key/);
    expect(() => validateDriverSettings('ftp', {})).toThrow(InvalidInputError);
    expect(() => validateDriverSettings('ftp', {})).toThrow(/unknown driver "ftp"; use one of: directory, simulated, exec, static-pool/);
  });
});

describe('simulated driver', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => database?.drop());
  const services = () => ({ query: (text: string, values: unknown[]) => database.pool.query(text, values) });
  const effects = async () =>
    (
      await sql<{ operation: string; object_id: number; idempotency_key: string; calls: number }>`
      select operation, object_id, idempotency_key, calls from simulated_effects order by operation, idempotency_key
    `.execute(database.db)
    ).rows;

  test('records one effect per idempotency key and counts repeated calls', async () => {
    const driver = SimulatedDriver.create(SimulatedDriver.settingsSchema.parse({}), services());
    await driver.releaseLease(leaseCall(7));
    await driver.releaseLease(leaseCall(7));
    await driver.releaseLease(leaseCall(8));
    expect(await effects()).toEqual([
      { operation: 'releaseLease', object_id: 9, idempotency_key: 'lease:9:7', calls: 2 },
      { operation: 'releaseLease', object_id: 9, idempotency_key: 'lease:9:8', calls: 1 },
    ]);
  });

  test('with recordEffects off, a call succeeds and records nothing', async () => {
    const before = await effects();
    const driver = SimulatedDriver.create(SimulatedDriver.settingsSchema.parse({ recordEffects: false }), services());
    await expect(driver.releaseLease(leaseCall(30))).resolves.toEqual({ attributes: { simulated: true } });
    expect(await effects()).toEqual(before);
  });

  test('fails transiently or permanently at the configured rates, before any effect', async () => {
    const before = (await effects()).length;
    const transient = SimulatedDriver.create(SimulatedDriver.settingsSchema.parse({ transientFailureRate: 1 }), services());
    await expect(transient.allocateResource(resourceCall(20))).rejects.toBeInstanceOf(TransientDriverError);
    const permanent = SimulatedDriver.create(
      SimulatedDriver.settingsSchema.parse({ permanentFailureRate: 1, failOperations: ['activateLease'] }),
      services(),
    );
    await expect(permanent.activateLease(leaseCall(21))).rejects.toBeInstanceOf(PermanentDriverError);
    await permanent.acquireLease(leaseCall(22));
    expect((await effects()).length).toBe(before + 1);
  });

  test('settings are validated', () => {
    expect(() => validateDriverSettings('simulated', { latencyMs: { min: 10, max: 1 } })).toThrow(/latencyMs.min must not exceed latencyMs.max/);
    expect(() => validateDriverSettings('simulated', { transientFailureRate: 2 })).toThrow(/transientFailureRate/);
    expect(() => validateDriverSettings('simulated', { recordEffects: 'no' })).toThrow(/recordEffects/);
    expect(validateDriverSettings('simulated', {})).toMatchObject({ latencyMs: { min: 0, max: 0 }, transientFailureRate: 0, recordEffects: true });
  });
});

describe('driver output', () => {
  test('output that is not { attributes?: {...} } is a permanent failure naming what was wrong', async () => {
    const liar = {
      ...DirectoryDriver.create({ root: '/nonexistent' }, noServices),
      allocateResource: async () => ({ attributes: 'a string' }),
    } as unknown as Driver;
    const checked = validatingDriver(liar);
    await expect(checked.allocateResource(resourceCall(1))).rejects.toBeInstanceOf(PermanentDriverError);
    await expect(checked.allocateResource(resourceCall(1))).rejects.toThrow(/allocateResource returned invalid output: attributes/);
  });

  test('the registry makes one driver per blueprint version, so a settings change takes effect', () => {
    const registry = new DriverRegistry(noServices);
    const v1 = { id: 3, version: 1, driver: 'simulated', settings: {} };
    expect(registry.forBlueprint(v1)).toBe(registry.forBlueprint(v1));
    expect(registry.forBlueprint({ ...v1, version: 2 })).not.toBe(registry.forBlueprint(v1));
  });
});
