import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { createLeases, simulatedBlueprint, tester, waitForLeases, waitForQuietQueues } from '../concurrency/support/fixtures.ts';
import { drainingConnections } from '../concurrency/support/lockHolder.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';

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
    // a second lane. The waiting lane also looks for new work every
    // IN_FLIGHT_CLAIM_MS, so a release that comes just before it looks joins
    // it instead, the more often the slower a new lane starts (a loaded
    // machine): hence many releases, at random moments of its round, all
    // within its first call.
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
