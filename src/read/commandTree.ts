import { type CompiledQuery, sql } from 'kysely';
import type { CommandRow } from '../../migrations/schema.ts';
import { compiledOnce } from '../db/compiledOnce.ts';
import type { Db } from '../db/Database.ts';
import { OBJECT_TABLE, type ObjectRef } from '../db/objectTables.ts';

/** A command in the tree of commands one command caused, `depth` steps below the root. */
export type CommandTreeNode = CommandRow & { readonly depth: number };

/**
 * A command and everything it caused, following `caused_by` down, in
 * depth-first order (each command right after the one that caused it, siblings
 * by id). Empty when the command does not exist.
 */
export async function readCommandTree(db: Db, rootId: number): Promise<CommandTreeNode[]> {
  return (await readCommandTrees(db, [{ rootId }]))[0]!.tree;
}

/** A tree to read, and the object whose current state to read with it, if any. */
export interface TreeQuery {
  readonly rootId: number;
  readonly object?: ObjectRef | undefined;
}

/** A tree as read (empty when its root does not exist), with its object's state (null: none asked for, or no such object). */
export interface TreeRead {
  readonly tree: CommandTreeNode[];
  readonly objectState: string | null;
}

/** The state of the object `asked` names (`a`, in readCommandTrees), from its kind's table: one branch per kind, only its own runs. */
const objectStateSql = sql.join(
  Object.entries(OBJECT_TABLE).map(
    ([kind, table]) => sql`select state from ${sql.table(table)} where a.object_kind = ${sql.lit(kind)} and id = a.object_id`,
  ),
  sql` union all `,
);

/**
 * The trees of several commands in one statement (see readCommandTree), in
 * the order asked, each with the current state of the object asked with it
 * (a `?wait` answers the state of the command's target with its tree): for
 * many waiters at once (CommandTreeReads). The state rides in the tree's
 * statement, so it is read with the same snapshot as the tree (a wait
 * never answers a settled tree with the state from before it settled) and
 * costs the waiter no statement of its own.
 *
 * Index lookups only, whatever the table's size: each root is found by its
 * key, and each level's children through `commands_by_cause`, from a
 * LATERAL subquery per row, which `offset 0` keeps from being flattened
 * into a join, and each row is
 * carried up the recursion instead of joined back by id. Written as plain
 * joins, the planner guesses each level at ten times the rows of the one
 * before; for a batch of roots that guess makes hashing the whole table look
 * cheaper than an index lookup per parent on any table of a few thousand
 * commands, and every ?wait answer paid a scan of all of them, once per
 * level and once more for the rows.
 */
export async function readCommandTrees(db: Db, queries: readonly TreeQuery[]): Promise<TreeRead[]> {
  return treesRead(queries.length, (await db.executeQuery(commandTreesStatement(queries))).rows);
}

/** The statement readCommandTrees sends, for a caller that sends it another way (CommandTreeReads). */
export function commandTreesStatement(queries: readonly TreeQuery[]): CompiledQuery {
  return treesStatement(
    queries.map((q) => q.rootId),
    queries.map((q) => q.object?.kind ?? null),
    queries.map((q) => q.object?.id ?? null),
  ).compile();
}

/** Every `?wait` answer reads it: compiled once. */
const treesStatement = compiledOnce(
  (db, roots: readonly number[], kinds: readonly (string | null)[], ids: readonly (number | null)[]) => ({
    compile: () =>
      sql`
    with recursive asked as (
      select * from unnest(${roots}::bigint[], ${kinds}::text[], ${ids}::bigint[]) with ordinality as a(root_id, object_kind, object_id, n)
    ),
    tree as (
      select c.*, 0 as depth, a.n as tree_query, array[c.id] as tree_path
        from asked a cross join lateral (select * from commands c where c.id = a.root_id offset 0) as c
      union all
      select child.*, tree.depth + 1, tree.tree_query, tree.tree_path || child.id
        from tree cross join lateral (select * from commands c where c.caused_by = tree.id offset 0) as child
    )
    select tree.*, case when tree.depth = 0 then (${objectStateSql}) end as object_state
      from tree join asked a on a.n = tree.tree_query
     order by tree.tree_query, tree.tree_path
  `.compile(db),
  }),
  [],
  [],
  [],
);

/** The `count` trees asked for, from the statement's rows (commandTreesStatement). */
export function treesRead(count: number, rows: readonly unknown[]): TreeRead[] {
  const reads = Array.from({ length: count }, () => ({ tree: [] as CommandTreeNode[], objectState: null as string | null }));
  for (const row of rows as (CommandTreeNode & { tree_query: number; tree_path: unknown; object_state: string | null })[]) {
    const { tree_query, tree_path: _, object_state, ...node } = row;
    const read = reads[Number(tree_query) - 1]!;
    if (node.depth === 0) read.objectState = object_state;
    read.tree.push(node);
  }
  return reads;
}
