import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { createLeases, simulatedBlueprint, tester, waitForLeases, waitForQuietQueues } from '../concurrency/support/fixtures.ts';
import { drainingConnections } from '../concurrency/support/lockHolder.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';

// How one worker's lanes share its work (src/drain/DrainEngine.ts): a lane
// waiting on slow driver calls does not hold up new work, which a signal
// gives to another lane. The lanes are told apart by their connections:
// each holds its objects' advisory locks on its own.

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let worker: SlipwayWorker;
const db = () => database.db;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 20 });
  worker = await SlipwayWorker.start(database, loadConfig({ DATABASE_URL: database.url, SLIPWAY_WORKER_CONCURRENCY: '2' }), testLog);
});
afterAll(async () => {
  await worker?.stop();
  await database?.drop();
});

/** Releases in the test below: each one that comes while the first lane waits is a chance for a second lane. */
const RELEASES = 12;

/** Samples drainingConnections until `until` settles: the most seen at once. */
async function mostWhile(until: Promise<unknown>): Promise<number> {
  let finished = false;
  void until.finally(() => (finished = true)).catch(() => undefined);
  let most = 0;
  while (!finished) most = Math.max(most, await drainingConnections(db()));
  await until;
  return most;
}

describe("a worker's lanes", () => {
  test('a lane waiting on slow driver calls leaves new work to another lane', async () => {
    const blueprint = await simulatedBlueprint(
      db(),
      'slow-releases',
      { maxResources: 1, leasesPerResource: RELEASES },
      { recordEffects: false, operationLatencyMs: { releaseLease: 3_000 } },
    );
    const leases = await createLeases(db(), blueprint, RELEASES);
    const ids = leases.map((l) => l.id);
    await waitForLeases(db(), ids, ['active']);
    await waitForQuietQueues(db());
    // Releases 100–200 ms apart, each calling the driver for 3 s: the first
    // lane is soon waiting on its calls, and a release signalled then starts
    // a second lane. The waiting lane also looks for new work each
    // time a signal starts no lane (DrainLane.lookAgain: while the second
    // lane takes its first wake-ups), so a release that comes then joins it
    // instead, the more often the slower a new lane starts (a loaded
    // machine): hence many releases, at random moments, all within its
    // first call.
    const released = (async () => {
      for (const id of ids) {
        await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: tester });
        await sleep(100 + Math.random() * 100);
      }
      await waitForLeases(db(), ids, ['destroyed']);
    })();
    expect(await mostWhile(released)).toBe(2);
  });
});

describe('a worker of one lane', () => {
  let oneLane: Awaited<ReturnType<typeof createTestDatabase>>;
  let single: SlipwayWorker;
  beforeAll(async () => {
    oneLane = await createTestDatabase({ poolSize: 10 });
    // No poll to speak of: only the signal of a new command can make the lane look in time.
    const config = loadConfig({ DATABASE_URL: oneLane.url, SLIPWAY_WORKER_CONCURRENCY: '1', SLIPWAY_DRAIN_POLL_MS: '600000' });
    single = await SlipwayWorker.start(oneLane, config, testLog);
  });
  afterAll(async () => {
    await single?.stop();
    await oneLane?.drop();
  });

  test('while every object it holds waits on a slow driver call, a new command is taken at once, not when the call returns', async () => {
    const slow = await simulatedBlueprint(
      oneLane.db,
      'slow',
      { maxResources: 1, leasesPerResource: 1 },
      { operationLatencyMs: { releaseLease: 15_000 } },
    );
    const fast = await simulatedBlueprint(oneLane.db, 'fast', { maxResources: 1, leasesPerResource: 1 });
    const [slowLease] = await createLeases(oneLane.db, slow, 1);
    const [fastLease] = await createLeases(oneLane.db, fast, 1);
    await waitForLeases(oneLane.db, [slowLease!.id, fastLease!.id], ['active']);
    await waitForQuietQueues(oneLane.db);

    const { command: slowRelease } = await appendCommand(oneLane.db, {
      target: { kind: 'lease', id: slowLease!.id },
      kind: 'release',
      actor: tester,
    });
    const status = async () =>
      (await oneLane.db.selectFrom('commands').select('status').where('id', '=', slowRelease.id).executeTakeFirstOrThrow()).status;
    // Marked running once its call outlived its step: the lane's one object now waits on it.
    await waitFor('the slow release to be in flight', async () => (await status()) === 'running');
    await appendCommand(oneLane.db, { target: { kind: 'lease', id: fastLease!.id }, kind: 'release', actor: tester });
    await waitForLeases(oneLane.db, [fastLease!.id], ['destroyed']);
    expect(await status()).toBe('running');
  });
});
