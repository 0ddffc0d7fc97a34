import { sql } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, expect, onTestFinished, test } from 'vitest';
import { GENERIC_PLANS } from '../../src/db/genericPlans.ts';
import { readCommandTree, readCommandTrees } from '../../src/read/commandTree.ts';
import { CommandTreeReads } from '../../src/read/CommandTreeReads.ts';
import { sidePool } from '../helpers/sidePool.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
const roots: number[] = [];

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 4 });
  // Forty settled trees of three commands each: root → child → grandchild.
  const command = (causedBy: number | null) =>
    database.db
      .insertInto('commands')
      .values({ target_kind: 'lease', target_id: 1, kind: 'release', issued_by: 'test', source: 'system', status: 'done', caused_by: causedBy })
      .returning('id')
      .executeTakeFirstOrThrow();
  for (let n = 0; n < 40; n++) {
    const root = await command(null);
    await command((await command(root.id)).id);
    roots.push(root.id);
  }
});
afterAll(async () => {
  await database?.drop();
});

/** Tree reads on the test database that count the reads they send. */
function countedReads(): { reads: CommandTreeReads; statements: () => number } {
  let statements = 0;
  const counting = new WeakSet<pg.PoolClient>();
  const pool = {
    connect: async () => {
      const client = await database.pool.connect();
      if (!counting.has(client)) {
        counting.add(client);
        const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
        // The reads' own queries: a transaction with generic plans (not the PREPAREs, nor others' queries on the connection).
        (client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args) => {
          if (typeof args[0] === 'string' && args[0].startsWith('begin') && args[0].includes(GENERIC_PLANS)) statements++;
          return query(...args);
        };
      }
      return client;
    },
  } as unknown as pg.Pool;
  return { reads: new CommandTreeReads(pool), statements: () => statements };
}

test('trees asked for together are read in one statement, each answered as readCommandTree answers it alone', async () => {
  const { reads, statements } = countedReads();
  const asked = [...roots, roots[0]!, 999_999_999];
  const answers = (await Promise.all(asked.map((rootId) => reads.read({ rootId })))).map((read) => read.tree);
  // The first two go at once, each alone (two reads may be under way); the
  // other 40, asked while those are, go together in the third.
  expect(statements()).toBe(3);
  for (const [n, id] of asked.entries()) expect(answers[n]).toEqual(await readCommandTree(database.db, id));
  expect(answers[0]!.map((node) => [node.depth, node.caused_by])).toEqual([
    [0, null],
    [1, roots[0]],
    [2, answers[0]![1]!.id],
  ]);
  expect(answers.at(-1)).toEqual([]);
});

test('a read PostgreSQL fails fails the reads that shared its statement, and the reads after it go on', async () => {
  const { reads } = countedReads();
  // The third to fifth share a statement, which a root id out of bigint's range fails.
  const results = await Promise.allSettled([roots[0], roots[1], roots[2], 2 ** 64, roots[3]].map((rootId) => reads.read({ rootId: rootId! })));
  expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected', 'rejected']);
  expect(String((results[3] as PromiseRejectedResult).reason)).toMatch(/out of range/);
  expect((await reads.read({ rootId: roots[3]! })).tree).toEqual(await readCommandTree(database.db, roots[3]!));
});

test('each tree is read with the state of the object asked with it, in the same statement', async () => {
  const blueprint = await database.db
    .insertInto('blueprints')
    .values({ name: 'tree-reads', driver: 'simulated', settings: '{}', max_resources: 1, leases_per_resource: 1 })
    .returning(['id', 'state'])
    .executeTakeFirstOrThrow();
  const lease = await database.db
    .insertInto('leases')
    .values({ blueprint_id: blueprint.id, holder: 'tree-reads', state: 'active' })
    .returning(['id', 'state'])
    .executeTakeFirstOrThrow();
  const { reads, statements } = countedReads();
  const asked = [
    { rootId: roots[0]!, object: { kind: 'lease', id: lease.id } },
    { rootId: roots[1]!, object: { kind: 'blueprint', id: blueprint.id } },
    { rootId: roots[2]! },
    { rootId: roots[3]!, object: { kind: 'resource', id: 999_999_999 } },
    { rootId: roots[4]!, object: { kind: 'lease', id: lease.id } },
  ] as const;
  // The first two read alone; the other three, together.
  const answers = await Promise.all(asked.map((query) => reads.read(query)));
  expect(statements()).toBe(3);
  expect(answers.map((read) => read.objectState)).toEqual(['active', blueprint.state, null, null, 'active']);
  for (const [n, query] of asked.entries()) expect(answers[n]!.tree).toEqual(await readCommandTree(database.db, query.rootId));
});

test('trees are read through the cause index, not by scanning commands, whatever their number', async () => {
  // The forty trees among a few thousand other commands, read at once as a ?wait server reads
  // them: a table small enough that hashing all of it looked cheaper to the planner.
  await sql`
    insert into commands (target_kind, target_id, kind, issued_by, source, status, finished_at)
    select 'lease', n, 'release', 'history', 'system', 'done', now() from generate_series(1, 5000) as n
  `.execute(database.db);
  await sql`analyze commands`.execute(database.db);

  await database.db.transaction().execute(async (trx) => {
    // This backend's counts not yet reported (pg_stat_xact_user_tables), before and after the read:
    // they may hold earlier transactions' too, so only the difference is the read's.
    const scans = async () => {
      const { rows } = await sql<{ seq_scan: string; idx_scan: string }>`
        select seq_scan, idx_scan from pg_stat_xact_user_tables where relname = 'commands'
      `.execute(trx);
      return { seq: Number(rows[0]!.seq_scan), idx: Number(rows[0]!.idx_scan) };
    };
    const before = await scans();
    const reads = await readCommandTrees(
      trx,
      roots.map((rootId) => ({ rootId })),
    );
    const after = await scans();
    expect(reads.map((read) => read.tree.map((node) => node.depth))).toEqual(roots.map(() => [0, 1, 2]));
    expect(after.seq - before.seq).toBe(0);
    expect(after.idx - before.idx).toBeGreaterThan(0);
  });
});

test('the reads are prepared on their connection and run with its generic plan, not planned afresh each time', async () => {
  // One connection, so the session that prepared the read is the one asked about it.
  const single = sidePool(database.url, { max: 1, types: database.pool.options.types });
  onTestFinished(() => single.end());
  const reads = new CommandTreeReads(single);
  for (const rootId of roots.slice(0, 8)) expect((await reads.read({ rootId })).tree).toEqual(await readCommandTree(database.db, rootId));
  const { rows } = await single.query<{ generic_plans: string; custom_plans: string }>(
    `select generic_plans, custom_plans from pg_prepared_statements where statement like '%with recursive asked%'`,
  );
  expect(rows.map((r) => [Number(r.generic_plans), Number(r.custom_plans)])).toEqual([[8, 0]]);
});
