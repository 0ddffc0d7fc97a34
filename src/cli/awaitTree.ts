import { lineStandingOf, treeOf } from '../api/shapes.ts';
import { INITIAL_STATE } from '../domain/lifecycle.ts';
import { failedCommands } from '../read/settled.ts';
import type { WaitRequest, WaitResult } from '../read/waitForSettled.ts';
import { CliFailure, EXIT } from './exitStatus.ts';
import { later } from './later.ts';
import { progressPrinter } from './progress.ts';
import type { Session } from './session.ts';
import type { Waited } from './transport/Transport.ts';
import { commandName } from './views/commandViews.ts';
import { formatDuration } from '../domain/durations.ts';

/** Waiting (command notices, and what they share with the drain) is loaded by the subcommands that wait. */
const waitForSettled = later(() => import('../read/waitForSettled.ts'), 'waitForSettled');
/** The database's reads too: remote mode, which imports this module for assertTreeSucceeded, waits through the API. */
const countLiveWorkers = later(() => import('../db/liveWorkers.ts'), 'countLiveWorkers');
const readLineStanding = later(() => import('../read/lineStanding.ts'), 'readLineStanding');

export interface AwaitRequest {
  readonly rootId: number;
  readonly object?: WaitRequest['object'];
  readonly timeoutSeconds: number;
}

/**
 * Waits for a command tree (see waitForSettled), printing progress. Warns
 * first when no worker is alive, since then nothing will run the commands
 * and the wait can only time out. An interrupted wait fails at once, before
 * the caller reads anything more.
 */
export async function awaitTree(session: Session, request: AwaitRequest): Promise<WaitResult & { outcome: Waited['outcome'] }> {
  const { db, config, out } = session;
  if ((await countLiveWorkers(db, config.SLIPWAY_HEARTBEAT_MS)) === 0) {
    out.warn(`no live worker: command ${request.rootId} waits until \`slipway start\` or \`slipway worker\` runs`);
  }
  const printProgress = progressPrinter(out, request.object?.ref);
  const result = await waitForSettled(session.database, {
    rootId: request.rootId,
    object: request.object,
    timeoutMs: request.timeoutSeconds * 1000,
    signal: session.interrupted,
    onSnapshot: async (snapshot) => {
      // A lease waiting for capacity: where it stands in line, read with each snapshot.
      const waiting = request.object?.ref.kind === 'lease' && snapshot.objectState === INITIAL_STATE.lease;
      const standing = waiting ? await readLineStanding(db, request.object!.ref.id) : undefined;
      printProgress({ ...snapshot, tree: treeOf(snapshot.tree), standing: standing && lineStandingOf(standing) });
    },
  });
  if (result.outcome === 'aborted') throw new CliFailure(`stopped waiting; ${carriesOn(request.rootId)}`, EXIT.interrupted);
  return { ...result, outcome: result.outcome };
}

/** Fails the CLI command when the wait timed out, or a command in the tree failed. */
export function assertTreeSucceeded(result: Waited, request: Pick<AwaitRequest, 'rootId' | 'timeoutSeconds'>): void {
  if (result.outcome === 'timed_out') {
    throw new CliFailure(`timed out after ${formatDuration(request.timeoutSeconds * 1000)}; ${carriesOn(request.rootId)}`, EXIT.failed);
  }
  const [failed] = failedCommands(result.tree);
  if (failed) throw new CliFailure(`command ${commandName(failed)} failed: ${failed.message ?? 'no message'}`, EXIT.failed);
}

/** What happens to a command tree the CLI stops waiting for. */
export function carriesOn(rootId: number): string {
  return `command ${rootId} carries on (see \`slipway command show ${rootId}\`)`;
}
