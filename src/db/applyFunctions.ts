import { sql } from 'kysely';
import type { Db } from './Database.ts';
import { FUNCTION_DEFINITIONS } from './functions/index.ts';

const NAMED = /^CREATE OR REPLACE FUNCTION public\.(\w+)\(/;

/** The name a definition of src/db/functions/ creates. */
export function functionName(definition: string): string {
  const name = NAMED.exec(definition)?.[1];
  if (!name)
    throw new Error(
      `a function definition must start "CREATE OR REPLACE FUNCTION public.<name>(", as pg_get_functiondef prints it: ${definition.slice(0, 80)}`,
    );
  return name;
}

/**
 * Creates or replaces each function whose definition differs from the
 * database's, after the migrations, in one transaction: all of them or none.
 * A fresh database and an upgraded one so end with the same functions, each
 * the text of its file. One that is already current is left alone, so a
 * process that starts does no DDL. Returns the names of those replaced.
 *
 * A definition that changes a function's arguments would add a second
 * function beside the one the release before calls, and is refused: a new
 * signature is a new function, in a file of its own, and the old one is
 * dropped by a migration once no running release calls it.
 */
export async function applyFunctions(db: Db, definitions: readonly string[] = FUNCTION_DEFINITIONS): Promise<string[]> {
  return db.transaction().execute(async (trx) => {
    // The migrator's own lock, so processes that start together replace each function once, one after another.
    await sql`select 1 from kysely_migration_lock where id = 'migration_lock' for update`.execute(trx);
    const replaced: string[] = [];
    for (const definition of await outdatedDefinitions(trx, definitions)) {
      const name = functionName(definition);
      await sql.raw(definition).execute(trx);
      const after = (await definitionsIn(trx)).get(name) ?? [];
      if (after.length > 1) {
        throw new Error(
          `src/db/functions/${name}.ts changes the arguments of ${name}, which would leave two functions of that name: ` +
            'give the new signature a name (and file) of its own, and drop the old one in a migration once no running release calls it',
        );
      }
      replaced.push(name);
    }
    return replaced;
  });
}

/**
 * The names of the functions whose definition in the database is not the
 * text of their file (or which it lacks): those `db migrate` would replace,
 * for `slipway db status`.
 */
export async function outdatedFunctions(db: Db): Promise<string[]> {
  const outdated = await db.transaction().execute((trx) => outdatedDefinitions(trx, FUNCTION_DEFINITIONS));
  return outdated.map(functionName);
}

/** The definitions that differ from the database's one function of their name, in a transaction (definitionsIn sets its path). */
async function outdatedDefinitions(trx: Db, definitions: readonly string[]): Promise<string[]> {
  const current = await definitionsIn(trx);
  return definitions.filter((definition) => {
    const now = current.get(functionName(definition)) ?? [];
    return !(now.length === 1 && now[0] === definition);
  });
}

/** Each function of the public schema by name, as pg_get_functiondef prints it with every name schema-qualified. */
async function definitionsIn(trx: Db): Promise<Map<string, string[]>> {
  const saved = await sql<{ path: string }>`select current_setting('search_path') as path`.execute(trx);
  await sql`select set_config('search_path', 'pg_catalog', true)`.execute(trx);
  const { rows } = await sql<{ name: string; definition: string }>`
    select p.proname as name, rtrim(pg_get_functiondef(p.oid), E'\n') as definition
      from pg_proc p
     where p.pronamespace = 'public'::regnamespace and p.prokind in ('f', 'p')`.execute(trx);
  // Back to the session's path: a SQL function's body is checked, when it is created, against the tables it names.
  await sql`select set_config('search_path', ${saved.rows[0]?.path ?? ''}, true)`.execute(trx);
  const byName = new Map<string, string[]>();
  for (const row of rows) byName.set(row.name, [...(byName.get(row.name) ?? []), row.definition]);
  return byName;
}
