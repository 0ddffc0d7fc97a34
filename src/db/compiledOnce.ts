import { type Compilable, CompiledQuery } from 'kysely';
import { compileOnly } from './compileOnly.ts';
import type { Db } from './Database.ts';

const COMPILER = compileOnly('statements compiled once are built with this; it runs none');

/**
 * A query built and compiled with Kysely once, when its module loads, and
 * run with new parameter values: `build` gets a Kysely that compiles only,
 * and `example` values for its parameters (distinct ones), each to be used once, in the
 * order the text numbers them (`$1`, `$2`, ...), which is checked here. A hot statement whose shape never changes (only its
 * values) then costs no query building at each call: building and compiling
 * a read with Kysely took longer in the process than the read took on the
 * server. Its text is also the same string at every call, so naming it for
 * a prepared statement (preparedText.ts) hashes it once.
 */
export function compiledOnce<R, P extends readonly unknown[]>(
  build: (db: Db, ...parameters: P) => Compilable<R>,
  ...example: NoInfer<P>
): (...parameters: P) => Compilable<R> {
  const { sql, parameters } = build(COMPILER, ...example).compile();
  if (parameters.length !== example.length || parameters.some((value, n) => !Object.is(value, example[n]))) {
    throw new Error(`a statement compiled once must use each of its ${example.length} parameters once, in order: ${sql}`);
  }
  return (...values) => {
    const compiled = CompiledQuery.raw(sql, [...values]) as CompiledQuery<R>;
    return { compile: () => compiled };
  };
}
