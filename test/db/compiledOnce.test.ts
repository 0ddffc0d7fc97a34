import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { compiledOnce } from '../../src/db/compiledOnce.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// A statement compiled once (src/db/compiledOnce.ts) keeps Kysely's text and
// takes new values at each call: the values must land in the places the
// text numbers, or a call would read with another call's values.
let database: Awaited<ReturnType<typeof createTestDatabase>>;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 1 });
});
afterAll(async () => database?.drop());

test('each call runs the one text with its own values', async () => {
  const pair = compiledOnce(
    (db, first: number, second: string) => db.selectNoFrom([sql<number>`${first}::int`.as('first'), sql<string>`${second}::text`.as('second')]),
    0,
    '',
  );
  expect(pair(1, 'a').compile().sql).toBe(pair(2, 'b').compile().sql);
  for (const [first, second] of [
    [1, 'a'],
    [2, "it's"],
  ] as const) {
    const { rows } = await database.db.executeQuery(pair(first, second));
    expect(rows).toEqual([{ first, second }]);
  }
});

test('a build that uses its parameters out of order, twice, or not at all is refused when it is compiled', () => {
  const build = (order: 'in order' | 'swapped' | 'twice' | 'one left out') => () =>
    compiledOnce(
      (db, first: number, second: number) => {
        const values = { 'in order': [first, second], swapped: [second, first], twice: [first, first, second], 'one left out': [first] }[order];
        return db.selectNoFrom(values.map((value, n) => sql<number>`${value}::int`.as(`v${n}`)));
      },
      1,
      2,
    );
  expect(build('in order')).not.toThrow();
  for (const order of ['swapped', 'twice', 'one left out'] as const) {
    expect(build(order)).toThrow(/must use each of its 2 parameters once, in order/);
  }
});
