import type { CommandRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { failedCommands, readCommandTree, type CommandTreeNode } from '../read/commandTree.ts';

/** How many commands of the tree a callback body lists: a resource release can cause hundreds. */
const TREE_LIMIT = 200;

/** What a callback POSTs: the command's final status and what its tree came to. */
export interface CallbackPayload {
  readonly event: 'command.settled';
  /** The callback's id (also in the Slipway-Delivery header): the same on every attempt. */
  readonly delivery: number;
  /** failed if any command in the tree failed; cancelled if the command itself was. */
  readonly outcome: 'succeeded' | 'failed' | 'cancelled';
  readonly command: Pick<
    CommandRow,
    | 'id'
    | 'target_kind'
    | 'target_id'
    | 'kind'
    | 'status'
    | 'message'
    | 'issued_by'
    | 'source'
    | 'reason'
    | 'request_id'
    | 'created_at'
    | 'finished_at'
  >;
  /** The command and what it caused, depth-first (as `slipway command show` lists it). */
  readonly tree: ReadonlyArray<
    Pick<CommandTreeNode, 'id' | 'depth' | 'kind' | 'target_kind' | 'target_id' | 'status' | 'message' | 'finished_at'>
  >;
  readonly tree_truncated: boolean;
}

/** The body of a callback on a command whose tree has settled. */
export async function buildCallbackPayload(db: Db, delivery: number, commandId: number): Promise<CallbackPayload> {
  const tree = await readCommandTree(db, commandId);
  const root = tree[0];
  if (!root) throw new Error(`callback ${delivery}: command ${commandId} is gone`);
  const outcome = root.status === 'cancelled' ? 'cancelled' : failedCommands(tree).length > 0 ? 'failed' : 'succeeded';
  const { id, target_kind, target_id, kind, status, message, issued_by, source, reason, request_id, created_at, finished_at } =
    root;
  return {
    event: 'command.settled',
    delivery,
    outcome,
    command: { id, target_kind, target_id, kind, status, message, issued_by, source, reason, request_id, created_at, finished_at },
    tree: tree.slice(0, TREE_LIMIT).map((n) => ({
      id: n.id,
      depth: n.depth,
      kind: n.kind,
      target_kind: n.target_kind,
      target_id: n.target_id,
      status: n.status,
      message: n.message,
      finished_at: n.finished_at,
    })),
    tree_truncated: tree.length > TREE_LIMIT,
  };
}
