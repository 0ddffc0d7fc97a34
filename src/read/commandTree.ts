import { sql } from 'kysely';
import type { CommandRow, CommandStatus } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';

/** A command in the tree of commands one command caused, `depth` steps below the root. */
export type CommandTreeNode = CommandRow & { readonly depth: number };

/** Statuses after which a command never changes again. */
const SETTLED_STATUSES: readonly CommandStatus[] = ['done', 'failed', 'cancelled', 'coalesced'];

/** Whether a command in this status (a row's, or a notice's) will never change again. */
export function isSettled(status: string): boolean {
  return SETTLED_STATUSES.includes(status as CommandStatus);
}

/**
 * A command and everything it caused, following `caused_by` down, in
 * depth-first order (each command right after the one that caused it, siblings
 * by id). Empty when the command does not exist.
 */
export async function readCommandTree(db: Db, rootId: number): Promise<CommandTreeNode[]> {
  return (await readCommandTrees(db, [rootId])).get(rootId) ?? [];
}

/**
 * The trees of several commands in one statement (see readCommandTree), by
 * root; a root that does not exist has no entry. For many waiters at once
 * (CommandTreeReads).
 *
 * Index lookups only, whatever the table's size: each level's children are
 * found through `commands_by_cause` from a LATERAL subquery per parent,
 * which `offset 0` keeps from being flattened into a join, and each row is
 * carried up the recursion instead of joined back by id. Written as plain
 * joins, the planner guesses each level at ten times the rows of the one
 * before; for a batch of roots that guess makes hashing the whole table look
 * cheaper than an index lookup per parent on any table of a few thousand
 * commands, and every ?wait answer paid a scan of all of them, once per
 * level and once more for the rows.
 */
export async function readCommandTrees(db: Db, rootIds: readonly number[]): Promise<Map<number, CommandTreeNode[]>> {
  const { rows } = await sql<CommandTreeNode & { tree_root: number; tree_path: unknown }>`
    with recursive tree as (
      select c.*, 0 as depth, c.id as tree_root, array[c.id] as tree_path from commands c where c.id = any(${[...rootIds]}::bigint[])
      union all
      select child.*, tree.depth + 1, tree.tree_root, tree.tree_path || child.id
        from tree cross join lateral (select * from commands c where c.caused_by = tree.id offset 0) as child
    )
    select * from tree order by tree_root, tree_path
  `.execute(db);
  const trees = new Map<number, CommandTreeNode[]>();
  for (const { tree_root, tree_path: _, ...node } of rows) {
    const root = Number(tree_root);
    const tree = trees.get(root) ?? [];
    tree.push(node);
    trees.set(root, tree);
  }
  return trees;
}

/** Every command of the tree has settled (a tree of rows, or of the API's shapes). */
export function treeSettled(tree: ReadonlyArray<{ readonly status: CommandStatus }>): boolean {
  return tree.every((node) => isSettled(node.status));
}

export function failedCommands<Node extends { readonly status: CommandStatus }>(tree: readonly Node[]): Node[] {
  return tree.filter((node) => node.status === 'failed');
}
