import type { CommandRow } from '../../migrations/schema.ts';
import type { AppendResult } from '../queue/appendCommand.ts';
import type { ObjectRef } from '../queue/objectTables.ts';
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

export async function commandSettled(
  context: ApiContext,
  target: ObjectRef,
  result: AppendResult,
  waitS: number,
  signal: AbortSignal,
): Promise<StoredResponse> {
  const { coalesced, record } = result;
  const waited = await waitTree(context, { rootId: result.command.id, timeoutMs: waitS * 1000, signal });
  const state = await readObjectState(context.database.db, target);
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
  waitS: number,
  signal: AbortSignal,
): Promise<StoredResponse> {
  const ref = { kind: 'lease', id: created.lease.id } as const;
  const waited = await waitTree(context, {
    rootId: created.command.id,
    object: { ref, until: leaseSetUp },
    timeoutMs: waitS * 1000,
    signal,
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
