import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { createLeases, simulatedBlueprint, tester, waitForLeases, waitForQuietQueues } from '../concurrency/support/fixtures.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';

// How one worker's lanes share its work (src/drain/DrainEngine.ts): a
// signal starts another lane only when no running lane would take the work
// promptly. A steady stream of commands is thus drained by one lane, in
// steps as large as the stream makes them, while a lane waiting on slow
// driver calls leaves new work to another lane. The lanes are told apart by
// their connections: each holds its objects' advisory locks on its own.

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

/** The connections of this database that hold drain locks (object_lock_key's prefix, 0x534c, in the key's top 16 bits) right now. */
async function drainingConnections(): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(distinct l.pid)::int as n from pg_locks l
    where l.locktype = 'advisory' and l.granted and l.objsubid = 1 and (l.classid::bigint >> 16) = ${0x534c}
      and l.database = (select oid from pg_database where datname = current_database())
  `.execute(db());
  return rows[0]!.n;
}

/** Samples drainingConnections until `until` settles: the most seen at once, and how many samples saw any. */
async function sampleWhile(until: Promise<unknown>): Promise<{ most: number; busy: number; samples: number }> {
  let finished = false;
  void until.finally(() => (finished = true)).catch(() => undefined);
  let most = 0;
  let busy = 0;
  let samples = 0;
  while (!finished) {
    const n = await drainingConnections();
    most = Math.max(most, n);
    if (n > 0) busy++;
    samples++;
  }
  await until;
  return { most, busy, samples };
}

describe("a worker's lanes", () => {
  test('a steady stream of commands is drained by one lane, not split between two', async () => {
    const blueprint = await simulatedBlueprint(db(), 'stream', { maxResources: 2, leasesPerResource: 20 }, { recordEffects: false });
    const leases = await createLeases(db(), blueprint, 40);
    await waitForLeases(
      db(),
      leases.map((l) => l.id),
      ['active'],
    );
    await waitForQuietQueues(db());
    // Four callers renewing leases back to back for two seconds: a decision
    // with no driver call, so the lane never waits on one, and never more
    // than four objects queued at once, so it is never full.
    const until = Date.now() + 2_000;
    let renewals = 0;
    const callers = Array.from({ length: 4 }, async () => {
      while (Date.now() < until) {
        const lease = leases[Math.floor(Math.random() * leases.length)]!;
        await appendCommand(db(), { target: { kind: 'lease', id: lease.id }, kind: 'renew', actor: tester });
        renewals++;
      }
    });
    const seen = await sampleWhile(Promise.all(callers).then(() => waitForQuietQueues(db())));
    expect(renewals).toBeGreaterThan(20);
    // The sampler saw the lane at work (so "at most one" is not an empty claim)…
    expect(seen.busy).toBeGreaterThan(0);
    // …and never two lanes holding objects at once.
    expect(seen.most).toBe(1);
  });

  test('a lane waiting on slow driver calls leaves new work to another lane', async () => {
    const blueprint = await simulatedBlueprint(
      db(),
      'slow-releases',
      { maxResources: 1, leasesPerResource: 4 },
      { recordEffects: false, operationLatencyMs: { releaseLease: 3_000 } },
    );
    const leases = await createLeases(db(), blueprint, 4);
    const ids = leases.map((l) => l.id);
    await waitForLeases(db(), ids, ['active']);
    await waitForQuietQueues(db());
    // Releases a few hundred ms apart, each calling the driver for 3 s: the
    // first lane is soon waiting on its calls, and a release signalled then
    // goes to a second lane (a release that comes just as the first lane
    // looks for work may still join it, hence several).
    const released = (async () => {
      for (const id of ids) {
        await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: tester });
        await sleep(300);
      }
      await waitForLeases(db(), ids, ['destroyed']);
    })();
    const seen = await sampleWhile(released);
    expect(seen.most).toBe(2);
  });
});
