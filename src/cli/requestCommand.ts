import { cliActor } from '../domain/Actor.ts';
import { appendCommand } from '../queue/appendCommand.ts';
import { describeObject, type ObjectRef } from '../queue/objectTables.ts';
import { readObjectState } from '../read/objectState.ts';
import { assertTreeSucceeded, awaitTree } from './awaitTree.ts';
import type { WaitOptions } from './options.ts';
import type { Session } from './session.ts';

/**
 * Asks an object for something (release, reclaim) the one way everyone does,
 * by appending a command as the CLI user, then, unless told not to, waits for
 * that command and everything it causes. A duplicate request joins the
 * command already queued and waits on that one.
 */
export async function requestCommand(
  session: Session,
  target: ObjectRef,
  kind: string,
  options: WaitOptions,
  payload?: unknown,
): Promise<void> {
  const { db, out } = session;
  const { command, coalesced, record } = await appendCommand(db, { target, kind, payload, actor: cliActor(options.reason) });
  const queued = `${kind} ${describeObject(target)}: ${coalesced ? 'already queued as' : 'queued as'} command ${command.id}`;
  if (!options.wait) {
    out.result({ command, coalesced, record }, () => queued);
    return;
  }
  out.progress(queued);
  const request = { rootId: command.id, timeoutSeconds: options.timeout };
  const result = await awaitTree(session, request);
  const state = await readObjectState(db, target);
  out.result(
    { command: result.tree[0], coalesced, record, outcome: result.outcome, state, tree: result.tree },
    () => `${describeObject(target)} is ${state}`,
  );
  assertTreeSucceeded(result, request);
}
