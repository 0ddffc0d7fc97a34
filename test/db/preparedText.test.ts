import { CompiledQuery } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { simpleQueryText } from '../../src/db/preparedText.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

// The drain sends its statements as one simple query, each value spliced in
// as a literal (src/db/preparedText.ts): a value must reach the server
// exactly as it would as a parameter, whatever characters it holds.
let database: Awaited<ReturnType<typeof createTestDatabase>>;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 2 });
});
afterAll(async () => database?.drop());

const awkward = [
  "it's",
  "''",
  'back\\slash',
  "\\'",
  'ends with a backslash\\',
  "E'\\x41'",
  '$$ dollar $tag$',
  'line\nbreak\ttab',
  'ünïcödé ✓ 𝄞',
  JSON.stringify({ message: 'say "hi"\\n', path: 'C:\\dir', quote: "'" }),
  '',
];

test.each(['on', 'off'])('values with quotes and backslashes arrive unchanged (standard_conforming_strings %s)', async (setting) => {
  const client = await database.pool.connect();
  try {
    await client.query(`set standard_conforming_strings = ${setting}`);
    const statement = CompiledQuery.raw('select $1::text as text, $2::jsonb as doc', ['', '{}']);
    for (const value of awkward) {
      const doc = JSON.stringify({ value });
      const text = await simpleQueryText(client, [CompiledQuery.raw(statement.sql, [value, doc])]);
      const { rows } = await client.query<{ text: string; doc: { value: string } }>(text);
      expect(rows[0]).toEqual({ text: value, doc: { value } });
    }
  } finally {
    // The setting is the session's: the connection is discarded, not returned to the pool with it.
    client.release(true);
  }
});
