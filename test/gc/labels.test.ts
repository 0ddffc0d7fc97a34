import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { InvalidInputError } from '../../src/domain/errors.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { readLineStanding } from '../../src/read/lineStanding.ts';
import { appendCommand, appendInTransaction } from '../../src/queue/appendCommand.ts';
import { handDrainSuite } from './support/handDrain.ts';

// Labels and selectors, with the drain run by hand: a lease is granted a
// slot only on a resource its selector matches, a static pool makes the
// entry that matches, a selector alone chooses the blueprint, and one that
// nothing can ever match is refused.
const admin = { issuedBy: 'admin@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();

const lease = async (id: number) =>
  db()
    .selectFrom('leases')
    .leftJoin('resources', 'resources.id', 'leases.resource_id')
    .select(['leases.state', 'resources.attributes'])
    .where('leases.id', '=', id)
    .executeTakeFirstOrThrow();
const entryOf = async (id: number) => ((await lease(id)).attributes as { entry?: string } | null)?.entry;
const release = async (id: number) => {
  await appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: admin });
  await hand.all();
};
const request = async (blueprint: string | undefined, selector?: string) =>
  (await createLease(db(), { ...(blueprint ? { blueprint } : {}), holder: 'h', ...(selector ? { selector } : {}) }, admin)).lease.id;
const rowCount = async () =>
  (await sql<{ n: number }>`select (select count(*) from leases) + (select count(*) from commands) as n`.execute(db())).rows[0]!.n;

test("a static pool makes the entry a lease's selector matches; a waiting lease is passed over for a slot it does not match", async () => {
  await createBlueprint(
    db(),
    {
      name: 'hosts',
      driver: 'static-pool',
      maxResources: 3,
      labels: { os: 'linux' },
      settings: { entries: [{ name: 'a', labels: { gpu: 'a100' } }, { name: 'b', labels: { gpu: 't4' } }, { name: 'c' }] },
    },
    admin,
  );
  const t4 = await request('hosts', 'gpu=t4, os=linux');
  const plain = await request('hosts', '!gpu');
  const a100 = await request('hosts', 'gpu in (a100, h100)');
  await hand.all();
  expect([await entryOf(t4), await entryOf(plain), await entryOf(a100)]).toEqual(['b', 'c', 'a']);
  const made = await db()
    .selectFrom('resources')
    .select(['labels', 'attributes'])
    .where('blueprint_id', '=', (await db().selectFrom('blueprints').select('id').where('name', '=', 'hosts').executeTakeFirstOrThrow()).id)
    .execute();
  expect(made.map((r) => [(r.attributes as { entry: string }).entry, r.labels]).sort()).toEqual([
    ['a', { gpu: 'a100' }],
    ['b', { gpu: 't4' }],
    ['c', {}],
  ]);

  // Another t4 lease waits; c's slot freed goes not to it but to a lease without a selector behind it.
  const secondT4 = await request('hosts', 'gpu=t4');
  await hand.all();
  expect((await lease(secondT4)).state).toBe('pending');
  await release(plain);
  expect((await lease(secondT4)).state).toBe('pending');
  // The blueprint says the slot is free and why the waiting lease did not get it: not "no free slot".
  const freed = await db().selectFrom('commands').select('message').where('kind', '=', 'slot_freed').orderBy('id', 'desc').executeTakeFirstOrThrow();
  expect(freed.message).toMatch(
    /^resource \d+ has a free slot; 1 lease\(s\) wait \(at its limit; 3 of 3 live, 1 free slot\(s\), which no waiting lease may take: its selector does not match, or a quota holds it back\)$/,
  );
  // The collector does not reclaim c, idle at a full blueprint, for a lease its replacement would not match either.
  await hand.pass();
  const reclaims = await db().selectFrom('commands').select('id').where('kind', '=', 'reclaim').execute();
  expect(reclaims).toEqual([]);
  const any = await request('hosts');
  await hand.all();
  expect((await lease(any)).state).toBe('active');
  expect(await entryOf(any)).toBe('c');
  // b's slot freed goes to it.
  await release(t4);
  expect((await lease(secondT4)).state).toBe('active');
  expect(await entryOf(secondT4)).toBe('b');

  // The resource refuses an acquire for a lease its labels do not match, whoever sends it.
  const wantsA100 = await request('hosts', 'gpu=a100');
  await hand.all();
  const c = await db()
    .selectFrom('resources')
    .select('id')
    .where(sql<boolean>`attributes->>'entry' = 'c'`)
    .where('state', '=', 'active')
    .executeTakeFirstOrThrow();
  await release(any);
  const { command } = await appendInTransaction(
    db(),
    { target: { kind: 'resource', id: c.id }, kind: 'acquire', payload: { leaseId: wantsA100 }, actor: admin },
    { fromOutside: false },
  );
  await hand.one('resource', c.id);
  const refused = await db().selectFrom('commands').select('message').where('id', '=', command.id).executeTakeFirstOrThrow();
  expect(refused.message).toBe(`refused lease ${wantsA100}: its selector does not match (gpu=a100, but there is no gpu label)`);
  await hand.all();
  expect((await lease(wantsA100)).state).toBe('pending');
  for (const id of [a100, secondT4]) await release(id);
  expect(await entryOf(wantsA100)).toBe('a');
  await release(wantsA100);
});

test('a selector alone chooses a blueprint whose resources may match, and says which and why; one nothing can match is refused, nothing written', async () => {
  await createBlueprint(db(), { name: 'x86', driver: 'simulated', maxResources: 2, labels: { arch: 'amd64' } }, admin);
  await createBlueprint(
    db(),
    { name: 'arm', driver: 'simulated', maxResources: 2, labels: { arch: 'arm64' }, settings: { labels: { ssd: 'yes' } } },
    admin,
  );
  const id = await request(undefined, 'arch=arm64, ssd');
  await hand.all();
  const row = await db()
    .selectFrom('leases')
    .innerJoin('blueprints', 'blueprints.id', 'leases.blueprint_id')
    .select(['blueprints.name', 'leases.state', 'leases.selector'])
    .where('leases.id', '=', id)
    .executeTakeFirstOrThrow();
  expect(row).toEqual({ name: 'arm', state: 'active', selector: 'arch=arm64, ssd' });
  const created = await db()
    .selectFrom('events')
    .select('message')
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', id)
    .where('type', '=', 'created')
    .executeTakeFirstOrThrow();
  expect(created.message).toBe(
    'requested on arm for h; selector arch=arm64, ssd may be matched at arm; went to arm: room to make a resource (0 of 2)',
  );

  const before = await rowCount();
  await expect(request(undefined, 'arch=riscv')).rejects.toThrow(InvalidInputError);
  await expect(request(undefined, 'arch=riscv')).rejects.toThrow(
    /^no blueprint that takes leases can ever match selector arch=riscv \(.*x86: arch=riscv, but arch is amd64; arm: arch=riscv, but arch is arm64/,
  );
  await expect(request('x86', 'arch=arm64')).rejects.toThrow(
    'no resource of blueprint x86 can ever match selector arch=arm64: arch=arm64, but arch is amd64',
  );
  await expect(request('x86', 'arch in (')).rejects.toThrow(/selector: .*at character 10 of "arch in \("/);
  expect(await rowCount()).toBe(before);
  await release(id);
});

/** Drains until nothing is left queued or running that is due soon: a yielded acquire and a driver call in flight included. */
const settle = async () => {
  for (let round = 0; round < 200; round++) {
    await hand.all();
    const left = await db()
      .selectFrom('commands')
      .select('id')
      .where('status', 'in', ['queued', 'running'])
      .where('not_before', '<=', new Date(Date.now() + 5_000))
      .limit(1)
      .executeTakeFirst();
    if (!left) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('the queues never settled');
};

test('a blueprint whose program decides labels makes at most one resource a lease may not match, and none while one made for its selector sits unmatched', async () => {
  // No allocation program: the exec driver makes each resource with no labels.
  const bp = await createBlueprint(
    db(),
    { name: 'programmed', driver: 'exec', settings: { commands: { destroyResource: ['true'] } }, maxResources: 4, leasesPerResource: 1 },
    admin,
  );
  const madeFor = () => db().selectFrom('resources').select(['id', 'state']).where('blueprint_id', '=', bp.id).orderBy('id').execute();
  const first = await request('programmed', 'arch=riscv');
  await settle();
  const [made, ...more] = await madeFor();
  expect(more).toEqual([]);
  expect(made).toMatchObject({ state: 'active' });
  expect((await lease(first)).state).toBe('pending');
  const unservable = (...ids: number[]) =>
    `${ids.map((id) => `resource ${id}, with no labels (arch=riscv, but there is no arch label)`).join(', ')}, made for selector arch=riscv, came back not matching it, ` +
    "and blueprint programmed's exec program decides every resource's labels, so it makes no other for this lease: change the selector, or label the blueprint";
  expect((await readLineStanding(db(), first))?.unservable).toBe(unservable(made!.id));

  // Another lease with that selector: the resource made for it still sits unmatched, so none is made.
  const second = await request('programmed', 'arch=riscv');
  await settle();
  expect(await madeFor()).toHaveLength(1);
  expect((await readLineStanding(db(), second))?.unservable).toBe(unservable(made!.id));
  // A lease any resource serves takes its slot.
  const plain = await request('programmed');
  await settle();
  expect((await lease(plain)).state).toBe('active');
  await release(plain);

  // Once that resource is gone, the first lease, for which it was made, makes none again; the second, which came after it was made, may make one.
  await appendCommand(db(), { target: { kind: 'resource', id: made!.id }, kind: 'release', actor: admin });
  await settle();
  const after = await madeFor();
  expect(after.map((r) => r.state)).toEqual(['destroyed', 'active']);
  expect((await readLineStanding(db(), first))?.unservable).toBe(unservable(made!.id, after[1]!.id));
  expect((await readLineStanding(db(), second))?.unservable).toBe(unservable(after[1]!.id));
  await release(first);
  await release(second);
});
