import type { CommandStatus } from '../../migrations/schema.ts';

// Whether commands have settled, apart from the reads of command trees
// (commandTree.ts): the CLI's remote mode decides it on the API's answers
// without loading the query builder.

/** Statuses after which a command never changes again. */
const SETTLED_STATUSES: readonly CommandStatus[] = ['done', 'failed', 'cancelled', 'coalesced'];

/** Whether a command in this status (a row's, or a notice's) will never change again. */
export function isSettled(status: string): boolean {
  return SETTLED_STATUSES.includes(status as CommandStatus);
}

/** Every command of the tree has settled (a tree of rows, or of the API's shapes). */
export function treeSettled(tree: ReadonlyArray<{ readonly status: CommandStatus }>): boolean {
  return tree.every((node) => isSettled(node.status));
}

export function failedCommands<Node extends { readonly status: CommandStatus }>(tree: readonly Node[]): Node[] {
  return tree.filter((node) => node.status === 'failed');
}
