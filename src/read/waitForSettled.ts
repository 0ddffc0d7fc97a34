import type { Database } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { ObjectRef } from '../queue/objectTables.ts';
import { CommandNotices, type CommandNotice, type NoticeListener } from './CommandNotices.ts';
import { treeSettled, type CommandTreeNode } from './commandTree.ts';
import { CommandTreeReads } from './CommandTreeReads.ts';
import { readObjectState, readTransitionsSince, type Transition } from './objectState.ts';

/**
 * How often the waiter looks again without a notice, by default. Notices come
 * only when a command settles or yields (not when it starts running), and a
 * LISTEN connection can drop, so a slow timer backs them up.
 */
const FALLBACK_MS = 1000;

export interface WaitRequest {
  /** The command whose tree (it and everything it caused) must settle. */
  readonly rootId: number;
  /**
   * An object that must also reach a state `until` accepts. A lease waiting
   * for capacity has a settled tree while still pending: the command that
   * will serve it belongs to another lease's tree.
   */
  readonly object?: { readonly ref: ObjectRef; readonly until: (state: string) => boolean };
  readonly timeoutMs: number;
  /** How often to look again when no notice comes (default 1 s). */
  readonly fallbackMs?: number;
  /** Stops the wait early (the commands carry on). */
  readonly signal?: AbortSignal;
  /**
   * A listener shared with other waiters (a server's one LISTEN connection);
   * without it the wait LISTENs on a connection of its own.
   */
  readonly listener?: NoticeListener;
  /** Tree reads shared with other waiters (a server's), sent together; without it the wait reads on its own. */
  readonly trees?: CommandTreeReads;
  /** Called with every fresh read, for progress reports. */
  readonly onSnapshot?: (snapshot: WaitSnapshot) => void;
}

export interface WaitSnapshot {
  readonly tree: readonly CommandTreeNode[];
  /** The watched object's state, or null when no object is watched. */
  readonly objectState: string | null;
  /** The watched object's transitions since the root command was queued. */
  readonly transitions: readonly Transition[];
}

export interface WaitResult extends WaitSnapshot {
  readonly outcome: 'settled' | 'timed_out' | 'aborted';
}

/**
 * Waits until a command and everything it caused have settled (and, if asked,
 * an object has reached a state), waking on the drain's notices about any
 * command in the tree or on the watched object, and re-reading the tree each
 * time. It only reads: stopping the wait leaves the commands running.
 */
export async function waitForSettled(database: Database, request: WaitRequest): Promise<WaitResult> {
  const deadline = Date.now() + request.timeoutMs;
  const notices = request.listener ? request.listener.subscribe() : await CommandNotices.listen(database.pool);
  const trees = request.trees ?? new CommandTreeReads(database.db);
  try {
    for (;;) {
      notices.clear();
      const snapshot = await readSnapshot(database, trees, request);
      request.onSnapshot?.(snapshot);
      const done = treeSettled(snapshot.tree) && (!request.object || request.object.until(snapshot.objectState!));
      if (done) return { ...snapshot, outcome: 'settled' };
      const remaining = deadline - Date.now();
      if (remaining <= 0) return { ...snapshot, outcome: 'timed_out' };
      const sleepMs = Math.min(request.fallbackMs ?? FALLBACK_MS, remaining);
      await notices.waitFor(concerns(snapshot, request.object?.ref), sleepMs, request.signal);
      // No read after an abort: a Ctrl-C in a terminal also reaches an
      // embedded PostgreSQL started by this process, which is going away.
      if (request.signal?.aborted) return { ...snapshot, outcome: 'aborted' };
    }
  } finally {
    await notices.close();
  }
}

async function readSnapshot(database: Database, trees: CommandTreeReads, request: WaitRequest): Promise<WaitSnapshot> {
  const tree = await trees.read(request.rootId);
  if (tree.length === 0) throw new NotFoundError('command', request.rootId);
  const object = request.object?.ref;
  const objectState = object ? await readObjectState(database.db, object) : null;
  const transitions = object ? await readTransitionsSince(database.db, object, request.rootId) : [];
  return { tree, objectState, transitions };
}

/**
 * A notice matters if it is about a command in the tree (whose outcome may
 * also have added children to it) or about the watched object.
 */
function concerns(snapshot: WaitSnapshot, object: ObjectRef | undefined): (notice: CommandNotice) => boolean {
  const ids = new Set(snapshot.tree.map((node) => node.id));
  const target = object ? `${object.kind}:${object.id}` : undefined;
  return (notice) => ids.has(notice.id) || notice.target === target;
}
