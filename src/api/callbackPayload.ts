import { z } from 'zod';
import { CommandSchema, CommandTreeNodeSchema, commandOf, EndingShape, treeNodeOf } from './shapes.ts';
import { EndingSchema } from '../domain/ending.ts';
import type { Db } from '../db/Database.ts';
import { readCommandTree } from '../read/commandTree.ts';
import { failedCommands } from '../read/settled.ts';

/** How many commands of the tree a callback body lists: a resource release can cause hundreds. */
const TREE_LIMIT = 200;

/** The command's fields a callback carries: what settled, who asked and why (GET /v1/commands/{id} has the rest). */
const CallbackCommand = CommandSchema.pick({
  id: true,
  targetKind: true,
  targetId: true,
  kind: true,
  status: true,
  message: true,
  issuedBy: true,
  source: true,
  reason: true,
  requestId: true,
  createdAt: true,
  finishedAt: true,
});

/** Each tree node's: enough to see what failed where; a tree can hold hundreds. */
const CallbackTreeNode = CommandTreeNodeSchema.pick({
  id: true,
  depth: true,
  kind: true,
  targetKind: true,
  targetId: true,
  status: true,
  message: true,
  finishedAt: true,
});

/**
 * What a callback POSTs: the command's final status and what its tree came
 * to, in the API's shapes (src/api/shapes.ts), so a receiver reads the same
 * fields as GET /v1/commands/{id} gives.
 */
export const CallbackPayloadSchema = z.object({
  event: z.literal('command.settled'),
  /** The callback's id (also in the Slipway-Delivery header): the same on every attempt. */
  delivery: z.number().int(),
  /** failed if any command in the tree failed; cancelled if the command itself was. */
  outcome: z.enum(['succeeded', 'failed', 'cancelled']),
  command: CallbackCommand,
  /** The command and what it caused, depth-first (as `slipway command show` lists it), at most TREE_LIMIT of them. */
  tree: z.array(CallbackTreeNode),
  treeTruncated: z.boolean(),
  /** A lease's notice of its end (a `notify_ending` command): by when Slipway ends the lease, and why. */
  ending: EndingShape.optional(),
  /**
   * The notice a `withdraw_ending` command withdrew: the end the holder had
   * been told of (its kind and time) and why it no longer stands. Absent
   * when there was nothing to withdraw.
   */
  withdrawn: EndingShape.optional(),
});
export type CallbackPayload = z.infer<typeof CallbackPayloadSchema>;

/** The body of a callback on a command whose tree has settled. */
export async function buildCallbackPayload(db: Db, delivery: number, commandId: number): Promise<CallbackPayload> {
  const tree = await readCommandTree(db, commandId);
  const root = tree[0];
  if (!root) throw new Error(`callback ${delivery}: command ${commandId} is gone`);
  const outcome = root.status === 'cancelled' ? 'cancelled' : failedCommands(tree).length > 0 ? 'failed' : 'succeeded';
  return {
    event: 'command.settled',
    delivery,
    outcome,
    // Parsed (zod strips what the pick leaves out), so the body has exactly the fields above.
    command: CallbackCommand.parse(commandOf(root)),
    tree: tree.slice(0, TREE_LIMIT).map((node) => CallbackTreeNode.parse(treeNodeOf(node))),
    treeTruncated: tree.length > TREE_LIMIT,
    ...(root.kind === 'notify_ending' ? { ending: EndingSchema.parse(root.payload) } : {}),
    ...(root.kind === 'withdraw_ending' ? await withdrawnBy(db, root.id) : {}),
  };
}

/**
 * What a `withdraw_ending` command withdrew, from the event its drain
 * recorded (its payload names the kind and the reason; the event adds the
 * time the holder had been told), or nothing when it withdrew nothing.
 */
async function withdrawnBy(db: Db, commandId: number): Promise<{ withdrawn?: z.infer<typeof EndingSchema> }> {
  const event = await db
    .selectFrom('events')
    .select('data')
    .where('command_id', '=', commandId)
    .where('type', '=', 'ending_withdrawn')
    .executeTakeFirst();
  return event ? { withdrawn: EndingSchema.parse(event.data) } : {};
}
