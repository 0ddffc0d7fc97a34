import { describeObject } from '../db/objectTables.ts';
import { assertTreeSucceeded } from './awaitTree.ts';
import type { WaitOptions } from './options.ts';
import type { Output } from './output.ts';
import type { CommandRequest, Transport } from './transport/Transport.ts';

/**
 * Asks an object for something (release, renew, reclaim) the one way
 * everyone does, by appending a command as the caller, then, unless told
 * not to, waits for that command and everything it causes. A duplicate
 * request joins the command already queued and waits on that one.
 */
export async function requestCommand(
  transport: Transport,
  out: Output,
  request: Omit<CommandRequest, 'reason'>,
  options: WaitOptions,
): Promise<void> {
  const { target, kind } = request;
  const queued = ({ command, coalesced }: { command: { id: number }; coalesced: boolean }) =>
    `${kind} ${describeObject(target)}: ${coalesced ? 'already queued as' : 'queued as'} command ${command.id}`;
  const full = { ...request, reason: options.reason };
  if (!options.wait) {
    out.result(await transport.requestCommand(full), queued);
    return;
  }
  const timeoutSeconds = options.timeout;
  const waited = await transport.requestCommandAndWait(full, { timeoutSeconds, accepted: (appended) => out.progress(queued(appended)) });
  out.result(waited, () => `${describeObject(target)} is ${waited.state}`);
  assertTreeSucceeded(waited, { rootId: waited.command.id, timeoutSeconds });
}
