import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { removeQuota, setQuota, setTeam } from '../../src/objects/teams.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { readTeam } from '../../src/read/teams.ts';
import { OverQuotaError } from '../../src/domain/errors.ts';
import { handDrainSuite } from './support/handDrain.ts';

// Fair share between teams and quotas, with the drain run by hand: which
// waiter each freed slot goes to, why, and who waits for a quota.
const admin = { issuedBy: 'admin@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

const stateOf = async (id: number) => (await db().selectFrom('leases').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;
const states = async (ids: readonly number[]) => Promise.all(ids.map(stateOf));
const release = async (id: number) => {
  await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: admin });
  await hand.all();
};
const request = async (blueprint: string, team: string, holder = `${team}-holder`) =>
  (await createLease(db(), { blueprint, holder, team }, admin)).lease.id;
/** The reason the acquire that served `leaseId` was sent with. */
const chosenBecause = async (leaseId: number) =>
  (
    await db()
      .selectFrom('commands')
      .select('reason')
      .where('kind', '=', 'acquire')
      .where(sql<boolean>`(payload->>'leaseId')::bigint = ${leaseId}`)
      .executeTakeFirstOrThrow()
  ).reason;
/** The last lease_waiting event of a lease's request: why it waits. */
const waitsBecause = async (leaseId: number) =>
  (
    await db()
      .selectFrom('events')
      .select('message')
      .where('type', '=', 'lease_waiting')
      .where(sql<boolean>`(data->>'leaseId')::bigint = ${leaseId}`)
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow()
  ).message;

/** A blueprint of `slots` one-slot resources, every slot held by a lease of the default team: answers those leases. */
async function fullPool(name: string, slots: number, priorityStepMs = 60_000): Promise<number[]> {
  await createBlueprint(db(), { name, driver: 'simulated', maxResources: slots, leasesPerResource: 1, priorityStepMs }, admin);
  const held: number[] = [];
  for (let i = 0; i < slots; i++) held.push(await request(name, 'default', `holder-${i}`));
  await hand.all();
  expect(new Set(await states(held))).toEqual(new Set(['active']));
  return held;
}

test('freed slots go to the team furthest below its weighted share, then by place; each grant says why', async () => {
  await setTeam(db(), { name: 'ci', weight: 3 }, admin);
  await setTeam(db(), { name: 'web', weight: 1 }, admin);
  const held = await fullPool('shared', 4, 0);
  // web asks first: its earlier place wins where the loads are equal.
  const web = [await request('shared', 'web'), await request('shared', 'web'), await request('shared', 'web')];
  const ci = [await request('shared', 'ci'), await request('shared', 'ci'), await request('shared', 'ci')];
  await hand.all();
  const order: number[] = [];
  for (const id of held) {
    await release(id);
    for (const waiter of [...web, ...ci]) if (!order.includes(waiter) && (await stateOf(waiter)) === 'active') order.push(waiter);
  }
  // Counted once served: ci (1/3, then 2/3 per weight) before web (1), then equal (1 and 1) and web's earlier place, then ci (1 against 2).
  expect(order).toEqual([ci[0], ci[1], web[0], ci[2]]);
  expect(await chosenBecause(ci[1]!)).toMatch(
    new RegExp(
      `^lease ${ci[1]} chosen for a slot: priority 0; team ci's share [\\d.]+, held [\\d.]+ lately \\(half-life 1h\\), holds 1 now; waited [\\dmsh.]+$`,
    ),
  );
  expect(await chosenBecause(web[0]!)).toMatch(/team web's share 0.8, held 0 lately \(half-life 1h\), holds 0 now/);
  // The lease's timeline carries it on its grant.
  const grant = await db()
    .selectFrom('commands')
    .select('reason')
    .where('target_id', '=', ci[1]!)
    .where('kind', '=', 'grant')
    .executeTakeFirstOrThrow();
  expect(grant.reason).toContain(`lease ${ci[1]} chosen for a slot: priority 0; team ci's share`);
  for (const id of [...order, ...web.slice(1)]) await release(id);
});

test('a team at its quota at a blueprint waits, saying so, while others get the room; it is served when it drops below', async () => {
  await setTeam(db(), { name: 'qa' }, admin);
  await createBlueprint(db(), { name: 'roomy', driver: 'simulated', maxResources: 5, leasesPerResource: 1 }, admin);
  await setQuota(db(), { team: 'qa', blueprint: 'roomy', maxLeases: 1 }, admin);
  const first = await request('roomy', 'qa');
  const second = await request('roomy', 'qa');
  const other = await request('roomy', 'default');
  await hand.all();
  expect(await states([first, second, other])).toEqual(['active', 'pending', 'active']);
  expect(await waitsBecause(second)).toBe(`lease ${second} waits: team qa's quota of 1 lease at roomy is reached (1 counted); 0 waiting ahead`);
  const team = await readTeam(db(), 'qa');
  expect(team.quotas).toEqual([expect.objectContaining({ blueprintName: 'roomy', maxLeases: 1, counted: 1 })]);
  expect(team.waiting).toBe(1);
  // Lowering the quota ends no lease.
  await setQuota(db(), { team: 'qa', blueprint: 'roomy', maxLeases: 0 }, admin);
  await hand.all();
  expect(await states([first, second])).toEqual(['active', 'pending']);
  // Removing it serves the waiter at once; every change is recorded, with who made it.
  await removeQuota(db(), { team: 'qa', blueprint: 'roomy' }, admin);
  await hand.all();
  expect(await stateOf(second)).toBe('active');
  const changes = (await readTeam(db(), 'qa')).changes.map((c) => [c.type, c.message, c.actor]);
  expect(changes).toEqual([
    ['quota_removed', "team qa's quota of 0 leases at roomy removed", 'admin@host'],
    ['quota_set', "team qa's quota of 0 leases at roomy", 'admin@host'],
    ['quota_set', "team qa's quota of 1 lease at roomy", 'admin@host'],
    ['created', 'made with weight 1', 'admin@host'],
  ]);
  for (const id of [first, second, other]) await release(id);
});

test('an overall quota counts every blueprint; a slot given back at one lets another serve the waiter', async () => {
  await setTeam(db(), { name: 'ops' }, admin);
  for (const name of ['east', 'west']) await createBlueprint(db(), { name, driver: 'simulated', maxResources: 3, leasesPerResource: 1 }, admin);
  await setQuota(db(), { team: 'ops', maxLeases: 1 }, admin);
  const east = await request('east', 'ops');
  await hand.all();
  const west = await request('west', 'ops');
  await hand.all();
  expect(await states([east, west])).toEqual(['active', 'pending']);
  expect(await waitsBecause(west)).toContain("team ops's quota of 1 lease overall is reached (1 counted)");
  await release(east);
  expect(await stateOf(west)).toBe('active');
  await release(west);
});

test('a holder at its quota waits while the rest of its team is served past it', async () => {
  await setTeam(db(), { name: 'dev' }, admin);
  await createBlueprint(db(), { name: 'desks', driver: 'simulated', maxResources: 4, leasesPerResource: 1 }, admin);
  await setQuota(db(), { team: 'dev', holder: 'token:bot', blueprint: 'desks', maxLeases: 1 }, admin);
  const bot = [await request('desks', 'dev', 'token:bot'), await request('desks', 'dev', 'token:bot')];
  const person = await request('desks', 'dev', 'token:ann');
  await hand.all();
  expect(await states([...bot, person])).toEqual(['active', 'pending', 'active']);
  expect(await waitsBecause(bot[1]!)).toContain("holder token:bot of team dev's quota of 1 lease at desks is reached (1 counted)");
  await release(bot[0]!);
  expect(await stateOf(bot[1]!)).toBe('active');
  for (const id of [bot[1]!, person]) await release(id);
});

test('queue: false is refused at once at a reached quota, naming it, and nothing is written', async () => {
  await setTeam(db(), { name: 'batch' }, admin);
  await createBlueprint(db(), { name: 'jobs', driver: 'simulated', maxResources: 3, leasesPerResource: 1 }, admin);
  await setQuota(db(), { team: 'batch', blueprint: 'jobs', maxLeases: 1 }, admin);
  const first = (await createLease(db(), { blueprint: 'jobs', holder: 'b', team: 'batch', queue: false }, admin)).lease.id;
  await hand.all();
  const count = async () => (await db().selectFrom('leases').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n;
  const before = await count();
  const refused = createLease(db(), { blueprint: 'jobs', holder: 'b', team: 'batch', queue: false }, admin);
  await expect(refused).rejects.toThrow(OverQuotaError);
  await expect(refused).rejects.toThrow(
    "team batch's quota of 1 lease at jobs is reached (1 counted); the request asked not to wait (queue: false), so no lease was made",
  );
  expect(await count()).toBe(before);
  // A team that does not exist is refused, saying how to make it.
  await expect(createLease(db(), { blueprint: 'jobs', holder: 'b', team: 'nobody' }, admin)).rejects.toThrow(
    'team nobody does not exist: make it with `slipway team set nobody`',
  );
  expect(await count()).toBe(before);
  await release(first);
});
