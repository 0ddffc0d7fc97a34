import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { withTransaction } from '../../src/db/withTransaction.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { updateBlueprint } from '../../src/objects/updateBlueprint.ts';
import { setTeam } from '../../src/objects/teams.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { readLineStanding } from '../../src/read/lineStanding.ts';
import { describeEstimate, describeStanding, describeWaiting, ordinal } from '../../src/read/standingText.ts';
import { handDrainSuite } from './support/handDrain.ts';

// A waiting lease's place in line and its estimate, from what the teams
// used at its blueprint (team_usage), with the drain run by hand.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

const release = (id: number) => appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: alice });
const newLease = async (holder: string, blueprint = 'line', team = 'default') =>
  (await createLease(db(), { blueprint, holder, team }, alice)).lease.id;

test("a waiting lease knows its place; its estimate comes from how long slots are held, the slots it may have and its team's part of them", async () => {
  await setTeam(db(), { name: 'ops', weight: 3 }, alice);
  await createBlueprint(db(), { name: 'line', driver: 'simulated', maxResources: 2, leasesPerResource: 1 }, alice);
  const holders = [await newLease('holder'), await newLease('holder')];
  await hand.all();
  const [a, b, c, d] = [await newLease('a'), await newLease('b'), await newLease('c'), await newLease('d', 'line', 'ops')];
  await hand.all();
  expect(await readLineStanding(db(), holders[0]!)).toBeUndefined();
  // No lease granted while others waited: nothing to go by.
  expect(await readLineStanding(db(), c!)).toMatchObject({
    blueprintName: 'line',
    position: 3,
    waiting: 4,
    estimateSeconds: null,
    basis: 'no basis yet: no lease was granted at line while others waited',
    // Why, as the blueprint said when the lease joined the line.
    reason: 'at its limit; 2 of 2 live, no free slot',
  });

  // The holder's slot goes to d: ops, of weight 3, holds none (a decision that weighs teams, and counts what they used).
  await release(holders[0]!);
  await hand.all();
  expect(await readLineStanding(db(), d!)).toBeUndefined();
  // Pin what the teams used to know the estimate: 2 grants, 96 slot-seconds, as of now: a slot is held 48 s per lease.
  await sql`update team_usage set slot_seconds = case team when 'default' then 64 else 32 end, grants = 1, held = 0, at = now()`.execute(db());
  // Only default waits now, for the 2 slots: one every 24 s, so its 3rd waiter, c, in 72 s.
  const last = (await readLineStanding(db(), c!))!;
  expect(last).toMatchObject({ position: 3, waiting: 3 });
  expect(last.basis).toBe("2 of team default's leases ahead of it; 2 slot(s) it may have at line, each held 48s per lease lately");
  expect(last.estimateSeconds).toBeCloseTo(72, 0);
  // With ops waiting too, default's part is a quarter of them: one every 96 s.
  const e = await newLease('e', 'line', 'ops');
  await hand.all();
  const shared = (await readLineStanding(db(), c!))!;
  expect(shared.basis).toBe(
    "2 of team default's leases ahead of it; 2 slot(s) it may have at line, each held 48s per lease lately, of which team default's part is 1 of 4 by weight",
  );
  expect(shared.estimateSeconds).toBeCloseTo(288, 0);
  expect(describeStanding({ ...last, position: 2, waiting: 2, estimateSeconds: 30 })).toBe('2nd in line at line (of 2), under a minute');
  expect(describeWaiting({ ...last, position: 2, waiting: 2, estimateSeconds: 30 })).toBe(
    '2nd in line at line (of 2), under a minute: at its limit; 2 of 2 live, no free slot',
  );
  for (const id of [holders[1]!, a!, b!, c!, d!, e]) await release(id);
  await hand.all();
  expect(await readLineStanding(db(), d!)).toBeUndefined();
});

test('estimates and places read as words', () => {
  expect([1, 2, 3, 4, 11, 12, 13, 21, 102, 111].map(ordinal)).toEqual(['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '102nd', '111th']);
  expect([null, 30, 90, 150, 3600, 4800].map(describeEstimate)).toEqual([
    'no estimate',
    'under a minute',
    'about 2 min',
    'about 3 min',
    'about 1 h',
    'about 1 h 20 min',
  ]);
});

test('a lease read while it leaves the line is either in line, with itself counted, or out of it', async () => {
  let reads = 0;
  for (let round = 0; round < 20; round++) {
    const blueprint = `race-${round}`;
    await createBlueprint(db(), { name: blueprint, driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, alice);
    const holder = await newLease('holder', blueprint);
    await hand.all();
    const waiter = await newLease('waiter', blueprint);
    await hand.all();
    expect(await readLineStanding(db(), waiter)).toMatchObject({ position: 1, waiting: 1 });
    // Reads run while the holder's release hands its slot to the waiter.
    let left = false;
    const reader = (async () => {
      while (!left) {
        const standing = await readLineStanding(db(), waiter);
        reads++;
        if (standing === undefined) return;
        expect(standing.position).toBe(1);
        expect(standing.waiting).toBe(1);
      }
    })();
    await release(holder);
    await hand.all();
    left = true;
    await reader;
    expect(await readLineStanding(db(), waiter)).toBeUndefined();
  }
  expect(reads).toBeGreaterThan(20);
});

test('a lease no resource of its blueprint can ever match says so, with no estimate: its labels changed under it', async () => {
  const bp = await createBlueprint(
    db(),
    { name: 'gpus', driver: 'simulated', maxResources: 1, leasesPerResource: 1, settings: { labels: { gpu: 'a100' } } },
    alice,
  );
  const holder = (await createLease(db(), { blueprint: 'gpus', holder: 'h', selector: 'gpu=a100' }, alice)).lease.id;
  await hand.all();
  const waiter = (await createLease(db(), { blueprint: 'gpus', holder: 'w', selector: 'gpu=a100' }, alice)).lease.id;
  await hand.all();
  // Its resource matches: it waits for the slot, as any lease would.
  expect(await readLineStanding(db(), waiter)).toMatchObject({ position: 1, unservable: null });

  // The blueprint's labels now say t4, over the driver's: nothing it has or may make matches gpu=a100.
  await withTransaction(db(), (trx) => updateBlueprint(trx, bp.id, { labels: { gpu: 't4' } }, alice));
  const standing = (await readLineStanding(db(), waiter))!;
  expect(standing).toMatchObject({
    position: 1,
    estimateSeconds: null,
    basis: 'no estimate: nothing it was sent to can serve it',
    unservable: 'no resource of blueprint gpus can ever match selector gpu=a100: gpu=a100, but gpu is t4',
  });
  expect(describeStanding(standing)).toBe(
    '1st in line at gpus (of 1), but it cannot be served: no resource of blueprint gpus can ever match selector gpu=a100: gpu=a100, but gpu is t4',
  );
  await release(holder);
  await release(waiter);
  await hand.all();
});

test('a lease at a blueprint whose program decides labels says it cannot be served once a resource made for its selector does not match', async () => {
  // No allocation program: the exec driver makes each resource with no labels.
  await createBlueprint(
    db(),
    { name: 'programmed', driver: 'exec', settings: { commands: { destroyResource: ['true'] } }, maxResources: 1, leasesPerResource: 1 },
    alice,
  );
  const lease = (await createLease(db(), { blueprint: 'programmed', holder: 'r', selector: 'arch=riscv' }, alice)).lease.id;
  await hand.all();
  await new Promise((resolve) => setTimeout(resolve, 300)); // the lease asks again after the resource refused it
  await hand.all();
  const resource = await db().selectFrom('resources').select(['id', 'state']).where('selector', '=', 'arch=riscv').executeTakeFirstOrThrow();
  expect(resource.state).toBe('active');
  const standing = (await readLineStanding(db(), lease))!;
  expect(standing).toMatchObject({ position: 1, estimateSeconds: null });
  expect(standing.unservable).toBe(
    `resource ${resource.id}, with no labels (arch=riscv, but there is no arch label), made for selector arch=riscv, came back not matching it, ` +
      "and blueprint programmed's exec program decides every resource's labels, so it makes no other for this lease: change the selector, or label the blueprint",
  );
  await release(lease);
  await hand.all();
});
