import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { CompiledQuery } from 'kysely';
import type pg from 'pg';

// node-postgres's own conversion of a parameter to its text form (arrays to
// array literals, dates with their offset, objects to JSON), so a value sent
// as a literal reaches the server exactly as the same value sent as a
// parameter.
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue(value: unknown): unknown };

/** Names prepared on each connection; a discarded connection takes its set with it. */
const preparedOn = new WeakMap<pg.ClientBase, Set<string>>();

/**
 * One simple query's text from its statements, in order: a string is sent as
 * it is (`begin`, `commit`: fixed text, nothing spliced in); a compiled
 * query becomes `execute name(literal, ...)`, PREPAREd on this connection
 * the first time it is seen there (one extra round trip for all of them,
 * once per connection).
 *
 * Why: a simple query carries no parameters, so its statements are parsed
 * and planned on every call, and the planner's work grows with a table's
 * indexes, of which leases and commands have many: for the drain's short
 * statements that is a real share of its server time. A prepared statement
 * keeps its plan on the connection; PostgreSQL
 * replans it by itself when a table's definition changes. A statement whose
 * result columns a migration has changed fails ("cached plan must not change
 * result type"); the drain discards a connection on any failure, and the next
 * one prepares afresh.
 *
 * PREPARE is not undone by a rollback, so statements are prepared in a round
 * trip of their own and only counted as prepared once it succeeded. The
 * parameter types are inferred as for a query's own parameters, and the
 * escaped literals are typed by them: values are never spliced into SQL.
 */
export async function simpleQueryText(client: pg.ClientBase, statements: readonly (string | CompiledQuery)[]): Promise<string> {
  let prepared = preparedOn.get(client);
  if (!prepared) {
    prepared = new Set();
    preparedOn.set(client, prepared);
  }
  const missing = new Map<string, string>();
  const texts = statements.map((statement) => {
    if (typeof statement === 'string') return statement;
    const name = statementName(statement.sql);
    if (!prepared.has(name)) missing.set(name, statement.sql);
    const args = statement.parameters.map((value) => {
      const text = prepareValue(value);
      return text === null || text === undefined ? 'null' : sqlLiteral(String(text));
    });
    return args.length === 0 ? `execute ${name}` : `execute ${name}(${args.join(', ')})`;
  });
  if (missing.size > 0) {
    // The line break ends a trailing `--` comment before the separator.
    await client.query([...missing].map(([name, text]) => `prepare ${name} as ${text}\n`).join(';\n'));
    for (const name of missing.keys()) prepared.add(name);
  }
  return texts.join(';\n');
}

/**
 * The text as a string literal, the same one node-postgres's escapeLiteral
 * writes (quotes doubled; with a backslash, the E'' form with backslashes
 * doubled too, which reads the same whatever standard_conforming_strings
 * says). Written with replaceAll because escapeLiteral builds its answer a
 * character at a time, which is slow on a step's JSON documents (a
 * settlement and its events, tens of kilobytes), escaped at every step.
 */
function sqlLiteral(text: string): string {
  if (text.includes('\\')) return ` E'${text.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * A name from the statement's text: the same text is the same statement on
 * every connection. Its hash is remembered per text, as the drain's
 * statements are few and sent over and over. `prefix` keeps apart the two
 * ways a connection prepares: a PREPARE in a simple query (here) and a
 * named statement of the protocol (PreparingClient) may hold the same text,
 * and PostgreSQL refuses a second statement of a name it has.
 */
const hashes = new Map<string, string>();
export function statementName(text: string, prefix: 'slipway' | 'slipway_named' = 'slipway'): string {
  let hash = hashes.get(text);
  if (hash === undefined) {
    hash = createHash('sha1').update(text).digest('hex').slice(0, 20);
    hashes.set(text, hash);
  }
  return `${prefix}_${hash}`;
}
