import { afterAll, beforeAll, expect, test } from 'vitest';
import { mergedAttributes } from '../../src/drain/Handler.ts';
import { updateObjectsStatement } from '../../src/drain/sql/updateObjects.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// A step's object rows go as one update per kind and set of columns, each
// column's new values as one typed array (sql/updateObjects.ts): what one
// group carries must come back exactly as each object's outcome set it,
// whatever node-postgres had to quote in the array's text.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
let database: Awaited<ReturnType<typeof createTestDatabase>>;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 2 });
});
afterAll(async () => database?.drop());

test('one batched update writes a JSON document, a time, null and text that needs quoting, each to its own object', async () => {
  const db = database.db;
  await createBlueprint(db, { name: 'quoting', driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, alice);
  const ids: number[] = [];
  for (let n = 0; n < 4; n++) ids.push((await createLease(db, { blueprint: 'quoting', holder: `holder ${n}` }, alice)).lease.id);
  const before = await db.selectFrom('leases').select(['id', 'version']).where('id', 'in', ids).orderBy('id').execute();

  const awkward = 'say "hi", {braces} \\ back\\slash, NULL, ünïcode\nnew line';
  const expiresAt = new Date('2031-02-03T04:05:06.789Z');
  const wanted = [
    { attributes: { note: awkward, nested: { list: [1, null, '"'] } }, expires_at: expiresAt, message: awkward },
    { attributes: {}, expires_at: null, message: null },
    // The text NULL and an empty string are values, not a missing one.
    { attributes: { empty: '' }, expires_at: new Date('1999-12-31T23:59:59.000Z'), message: 'NULL' },
    { attributes: { n: 1.5, yes: true }, expires_at: null, message: '' },
  ];
  const updates = before.map((row, i) => ({
    id: row.id,
    version: row.version + 1,
    // As an outcome sets them: a JSON column's value is its JSON text (mergedAttributes).
    values: { ...wanted[i]!, attributes: mergedAttributes({}, wanted[i]!.attributes) },
  }));

  const returned = await db.executeQuery(updateObjectsStatement('lease', ['attributes', 'expires_at', 'message'], updates));
  expect(returned.rows).toHaveLength(4);

  const after = await db
    .selectFrom('leases')
    .select(['id', 'version', 'attributes', 'expires_at', 'message'])
    .where('id', 'in', ids)
    .orderBy('id')
    .execute();
  expect(after).toEqual(before.map((row, i) => ({ id: row.id, version: row.version + 1, ...wanted[i] })));
});
