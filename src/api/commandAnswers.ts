import type { CommandRow } from '../../migrations/schema.ts';
import type { AppendResult } from '../queue/appendCommand.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import type { CommandNotices } from '../read/CommandNotices.ts';
import { findLease, leaseSetUp, type LeaseView } from '../read/leases.ts';
import { readObjectState } from '../read/objectState.ts';
import { waitForSettled, type WaitRequest } from '../read/waitForSettled.ts';
import type { ApiContext } from './ApiContext.ts';
import type { StoredResponse } from './idempotency.ts';
import type { CommandAnswer, LeaseAnswer } from './contract.ts';
import { commandOf, leaseOf, treeOf } from './shapes.ts';

/**
 * The answers of the POSTs that queue work. Their bodies are what the CLI
 * prints with --json for the same request (`--no-wait`, or waiting), so a
 * remote CLI can print an answer as it comes.
 *
 * Status: 202 while the work is still to do (no wait, or the wait ran out);
 * 200 once it has settled (success or failure: the tree says which), and for
 * a duplicate that joined a command already queued or running.
 */
export function commandLocation(commandId: number): Record<string, string> {
  return { location: `/v1/commands/${commandId}` };
}

export function commandAccepted(result: AppendResult): StoredResponse {
  const { command, coalesced, record } = result;
  const body: CommandAnswer = { command: commandOf(command), coalesced, record: commandOf(record) };
  return { status: coalesced ? 200 : 202, headers: commandLocation(command.id), body };
}

/** A request's `?wait`: its seconds, and the notices it subscribed to before its write. */
export interface RequestWait {
  readonly seconds: number;
  readonly notices: CommandNotices;
}

/**
 * Runs a POST's work with its wait's notices subscribed first, when it waits,
 * so the wait misses no notice of what the work writes, and can start from
 * the command it appended instead of reading it back (see waitForSettled).
 */
export async function subscribedFirst<T>(context: ApiContext, seconds: number | undefined, post: (wait?: RequestWait) => Promise<T>): Promise<T> {
  if (!seconds) return post();
  const notices = context.notices.subscribe();
  try {
    return await post({ seconds, notices });
  } finally {
    await notices.close();
  }
}

export async function commandSettled(
  context: ApiContext,
  target: ObjectRef,
  result: AppendResult,
  wait: RequestWait,
  signal: AbortSignal,
): Promise<StoredResponse> {
  const { coalesced, record } = result;
  // A command this request appended has caused nothing yet; one it joined may have.
  const since = { notices: wait.notices, tree: coalesced ? undefined : [{ ...result.command, depth: 0 }] };
  // The target's state is read with the tree, whatever it is.
  const object = { ref: target, until: () => true };
  const waited = await waitTree(context, { rootId: result.command.id, object, timeoutMs: wait.seconds * 1000, signal, since });
  const state = waited.objectState ?? (await readObjectState(context.database.db, target));
  const tree = treeOf(waited.tree);
  const body: CommandAnswer = { command: commandOf(waited.tree[0]!), coalesced, record: commandOf(record), outcome: waited.outcome, state, tree };
  return { status: coalesced || waited.outcome === 'settled' ? 200 : 202, headers: commandLocation(result.command.id), body };
}

export function leaseAccepted(created: { lease: LeaseView; command: CommandRow }): StoredResponse {
  const body: LeaseAnswer = { lease: leaseOf(created.lease), command: commandOf(created.command) };
  return { status: 202, headers: commandLocation(created.command.id), body };
}

/** A new lease is settled when its tree has, and it is past setting up (it may first wait for capacity). */
export async function leaseSettled(
  context: ApiContext,
  created: { lease: LeaseView; command: CommandRow },
  wait: RequestWait,
  signal: AbortSignal,
): Promise<StoredResponse> {
  const ref = { kind: 'lease', id: created.lease.id } as const;
  const waited = await waitTree(context, {
    rootId: created.command.id,
    object: { ref, until: leaseSetUp },
    timeoutMs: wait.seconds * 1000,
    signal,
    since: { notices: wait.notices, tree: [{ ...created.command, depth: 0 }] },
  });
  const lease = await findLease(context.database.db, ref.id);
  const tree = treeOf(waited.tree);
  const body: LeaseAnswer = { lease: leaseOf(lease), command: commandOf(waited.tree[0]!), outcome: waited.outcome, tree };
  return { status: waited.outcome === 'settled' ? 200 : 202, headers: commandLocation(created.command.id), body };
}

function waitTree(context: ApiContext, request: Omit<WaitRequest, 'listener' | 'trees'>) {
  return waitForSettled(context.database, {
    ...request,
    listener: context.notices,
    trees: context.trees,
    fallbackMs: context.config.SLIPWAY_API_WAIT_REREAD_MS,
  });
}
