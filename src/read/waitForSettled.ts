import type { Database } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import { CommandNotices, type CommandNotice, type NoticeListener } from './CommandNotices.ts';
import type { CommandTreeNode } from './commandTree.ts';
import { isSettled, treeSettled } from './settled.ts';
import { CommandTreeReads } from './CommandTreeReads.ts';
import { readTransitionsSince, type Transition } from './objectState.ts';

/**
 * How often the waiter reads again without a notice, by default. Notices come
 * only when a command settles or yields (not when it starts running), and a
 * LISTEN connection can drop, so a slow timer backs them up.
 */
const FALLBACK_MS = 1000;

export interface WaitRequest {
  /** The command whose tree (it and everything it caused) must settle. */
  readonly rootId: number;
  /**
   * An object that must also reach a state `until` accepts (its state is
   * read with the tree, and answered). A lease waiting for capacity has a
   * settled tree while still pending: the command that will serve it belongs
   * to another lease's tree.
   */
  readonly object?: { readonly ref: ObjectRef; readonly until: (state: string) => boolean };
  readonly timeoutMs: number;
  /** How often to read again when no notice comes (default 1 s). */
  readonly fallbackMs?: number;
  /** Stops the wait early (the commands carry on). */
  readonly signal?: AbortSignal;
  /**
   * A listener shared with other waiters (a server's one LISTEN connection);
   * without it the wait LISTENs on a connection of its own.
   */
  readonly listener?: NoticeListener;
  /**
   * Notices the caller subscribed to before it wrote the root command (the
   * caller closes them), and, if it knows it, the tree as that write left
   * it: a command just appended, queued, having caused nothing yet. The wait
   * then starts from that tree instead of reading it: what happened since
   * the write is in the notices.
   */
  readonly since?: { readonly notices: CommandNotices; readonly tree?: readonly CommandTreeNode[] };
  /** Tree reads shared with other waiters (a server's), sent together; without it the wait reads on its own. */
  readonly trees?: CommandTreeReads;
  /**
   * Called with every fresh read, for progress reports. A wait with it reads
   * after every notice about its tree; one without reads when the notices
   * say the tree has settled (see waitForSettled). The wait reads on once
   * it has returned (a report may read more, e.g. a lease's place in line).
   */
  readonly onSnapshot?: (snapshot: WaitSnapshot) => void | Promise<void>;
}

export interface WaitSnapshot {
  readonly tree: readonly CommandTreeNode[];
  /** The watched object's state, or null when no object is watched (or nothing has been read yet). */
  readonly objectState: string | null;
  /** The watched object's transitions since the root command was queued (read for a wait that reports progress). */
  readonly transitions: readonly Transition[];
}

export interface WaitResult extends WaitSnapshot {
  readonly outcome: 'settled' | 'timed_out' | 'aborted';
}

/**
 * Waits until a command and everything it caused have settled (and, if asked,
 * an object has reached a state), and answers the tree as then read. It only
 * reads: stopping the wait leaves the commands running.
 *
 * Between reads it follows the drain's notices: each says a command settled
 * (or yielded) and which commands its settling caused, so the wait learns of
 * the tree's new commands as they are made and reads the tree again only
 * when, by the notices, all of it has settled (or a notice cannot tell what
 * its command caused, notices were lost, the watched object had a notice
 * while short of its state, or the fallback timer ran out). A release that
 * returns its slot is thus one read at the end rather than one after each
 * notice. The read decides: a notice only says when to look.
 */
export async function waitForSettled(database: Database, request: WaitRequest): Promise<WaitResult> {
  const deadline = Date.now() + request.timeoutMs;
  const { since } = request;
  const notices = since?.notices ?? (request.listener ? request.listener.subscribe() : await CommandNotices.listen(database.pool));
  const trees = request.trees ?? new CommandTreeReads(database.pool);
  const fallbackMs = request.fallbackMs ?? FALLBACK_MS;
  const { object } = request;
  const eager = request.onSnapshot !== undefined;
  let snapshot: WaitSnapshot | undefined = since?.tree && { tree: since.tree, objectState: null, transitions: [] };
  try {
    for (;;) {
      if (!snapshot) {
        notices.clear();
        snapshot = await readSnapshot(database, trees, request);
        await request.onSnapshot?.(snapshot);
      }
      const state = snapshot.objectState;
      // Whether the watched object is in a state `until` accepts: unknown (null) until read, as
      // the tree the caller knows comes without it (it is read with the tree, once that has settled).
      const reached = !object || (state === null ? null : object.until(state));
      if (treeSettled(snapshot.tree) && reached === true) return { ...snapshot, outcome: 'settled' };
      // The object's notices matter once it has been read and found short.
      const target = object && reached === false ? `${object.ref.kind}:${object.ref.id}` : undefined;
      const readBy = Date.now() + fallbackMs;
      for (;;) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) return { ...snapshot, outcome: 'timed_out' };
        const awaiting = awaited(snapshot.tree, notices, target, eager);
        if (!awaiting || Date.now() >= readBy) break;
        // A yield's notice (status queued) changes nothing awaited, unless progress is reported.
        const news = (notice: CommandNotice) => (awaiting.has(notice.id) && (eager || isSettled(notice.status))) || notice.target === target;
        await notices.waitFor(news, Math.min(readBy - Date.now(), remaining), request.signal);
        // No read after an abort: a Ctrl-C in a terminal also reaches an
        // embedded PostgreSQL started by this process, which is going away.
        if (request.signal?.aborted) return { ...snapshot, outcome: 'aborted' };
      }
      snapshot = undefined;
    }
  } finally {
    if (!since) await notices.close();
  }
}

/**
 * The commands whose notices the wait still waits for, from the tree last
 * read and the notices since; null when it is time to read again: every
 * command of the tree has settled as far as the notices tell, a notice
 * cannot tell what its command caused, notices were lost, or a notice came
 * for `target` (the watched object, while short of its state). `eager`:
 * any notice about the tree is reason to read (progress is reported from
 * reads).
 */
function awaited(tree: readonly CommandTreeNode[], notices: CommandNotices, target: string | undefined, eager: boolean): Set<number> | null {
  const received = notices.sinceClear;
  if (notices.lost || (target !== undefined && received.some((notice) => notice.target === target))) return null;
  const last = new Map(received.map((notice) => [notice.id, notice]));
  const waiting = new Set<number>();
  // True while the command, and all it caused, is either awaited or known settled.
  const follow = (id: number): boolean => {
    const notice = last.get(id);
    if (notice && eager) return false;
    if (!notice || !isSettled(notice.status)) {
      waiting.add(id);
      return true;
    }
    return notice.caused?.every(follow) ?? false;
  };
  const open = tree.filter((node) => !isSettled(node.status));
  if (!open.every((node) => follow(node.id))) return null;
  // A settled tree is waited on only for its object's notices.
  return waiting.size > 0 || (open.length === 0 && target !== undefined) ? waiting : null;
}

async function readSnapshot(database: Database, trees: CommandTreeReads, request: WaitRequest): Promise<WaitSnapshot> {
  const object = request.object?.ref;
  const [{ tree, objectState }, transitions] = await Promise.all([
    trees.read({ rootId: request.rootId, object }),
    object && request.onSnapshot ? readTransitionsSince(database.db, object, request.rootId) : [],
  ]);
  if (tree.length === 0) throw new NotFoundError('command', request.rootId);
  if (object && objectState === null) throw new NotFoundError(object.kind, object.id);
  return { tree, objectState, transitions };
}
