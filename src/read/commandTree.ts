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
 */
export async function readCommandTrees(db: Db, rootIds: readonly number[]): Promise<Map<number, CommandTreeNode[]>> {
  const { rows } = await sql<CommandTreeNode & { tree_root: number }>`
    with recursive tree (root, id, depth, path) as (
      select id, id, 0, array[id] from commands where id = any(${[...rootIds]}::bigint[])
      union all
      select tree.root, c.id, tree.depth + 1, tree.path || c.id from commands c join tree on c.caused_by = tree.id
    )
    select c.*, tree.depth, tree.root as tree_root from tree join commands c using (id) order by tree.root, tree.path
  `.execute(db);
  const trees = new Map<number, CommandTreeNode[]>();
  for (const { tree_root, ...node } of rows) {
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
