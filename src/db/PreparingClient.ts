import { type Compilable, CompiledQuery } from 'kysely';
import pg from 'pg';
import type { Db } from './Database.ts';
import { statementName } from './preparedText.ts';

/**
 * The comment that, at the very start of a statement's text, has
 * PreparingClient send it as a named prepared statement.
 */
export const PREPARED_MARK = '/* prepared */';

/**
 * The node-postgres client of this project's pools: a statement whose text
 * starts with PREPARED_MARK is sent as a named prepared statement (parsed
 * and planned once per connection, then only bound and executed); every
 * other statement as before, unnamed. Kysely sends each query as text and
 * parameters, so the mark in the text is how a query built with it asks.
 *
 * For hot statements that callers outside the drain send one at a time:
 * an append from the CLI, the collector or a script, where parsing and
 * planning the statement are a large share of its server work; a new
 * lease; the wake-up signal after each (asynchronousCommit.ts); and, on a
 * drain's connection, a resource's answer to an acquire (takeSlot.ts), whose
 * planning cost more than its execution. The drain
 * and the API's batched appends prepare theirs in simple queries
 * (preparedText.ts). A marked statement must name its result columns, never
 * `*` or `(row).*`: PostgreSQL replans a prepared statement by itself when
 * a table changes, but fails it if its result columns would change.
 */
export class PreparingClient extends pg.Client {
  // biome-ignore lint/suspicious/noExplicitAny: node-postgres's query() has a dozen overloads; this forwards them all.
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config === 'string' && config.startsWith(PREPARED_MARK)) {
      const named: pg.QueryConfig = {
        name: statementName(config, 'slipway_named'),
        text: config,
        values: typeof values === 'function' ? undefined : values,
      };
      return super.query(named, typeof values === 'function' ? values : callback);
    }
    return super.query(config, values, callback);
  }
}

/**
 * Runs a query built with Kysely as a prepared statement (its text marked):
 * for a hot read whose parsing and planning cost more than its execution.
 * Its constants must be literals in its text (`sql.lit`, or raw SQL), not
 * parameters: PostgreSQL may come to run one generic plan for every call,
 * and a partial index matches only constants it can see in the text.
 */
export async function executePrepared<R>(db: Db, query: Compilable<R>): Promise<R[]> {
  const { sql, parameters } = query.compile();
  const { rows } = await db.executeQuery<R>(CompiledQuery.raw(markedText(sql), [...parameters]));
  return rows;
}

/**
 * The text with its mark, the same string for the same text: a statement
 * compiled once (compiledOnce.ts) is then named (statementName) from a
 * string whose hash is already known, rather than a new one each call.
 */
const marked = new Map<string, string>();
function markedText(sql: string): string {
  let text = marked.get(sql);
  if (text === undefined) {
    text = `${PREPARED_MARK} ${sql}`;
    marked.set(sql, text);
  }
  return text;
}
