import { createRequire } from 'node:module';
import type { CompiledQuery } from 'kysely';

// node-postgres's own conversion of a parameter to its text form (arrays to
// array literals, dates with their offset, objects to JSON), so an inlined
// value reaches the server exactly as the same value sent as a parameter.
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue(value: unknown): unknown };

/**
 * A compiled query as plain SQL text, each `$n` replaced by its value as an
 * escaped literal, so that several statements can travel in ONE simple
 * query (which takes no parameters). An untyped literal is resolved from
 * its context as an untyped parameter would be, and values stay escaped,
 * never spliced.
 *
 * Only for Slipway's own statements: their text has no `$n` other than
 * placeholders, and no comments or white space that matters (no
 * dollar-quoting, no string literals holding either).
 */
export function inlineParameters(query: CompiledQuery, escapeLiteral: (text: string) => string): string {
  if (query.sql.includes('--')) throw new Error(`inlineParameters takes no SQL comments: ${query.sql.slice(0, 80)}`);
  // Runs of white space become one space first: the text is sent on every
  // call, and the values, inlined after, keep theirs.
  return query.sql.replace(/\s+/g, ' ').replace(/\$(\d+)/g, (_, n: string) => {
    const index = Number(n) - 1;
    if (index >= query.parameters.length) throw new Error(`query has no parameter $${n}: ${query.sql.slice(0, 80)}`);
    const value = prepareValue(query.parameters[index]);
    return value === null || value === undefined ? 'null' : escapeLiteral(String(value));
  });
}
