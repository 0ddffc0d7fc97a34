import type { Logger } from '../src/log.ts';
import type { FromWorker, Message } from './workerProtocol.ts';

/**
 * The worker side of WorkerFleet's IPC, for a forked worker process: each
 * message gets `handle`'s reply; the 'stopped' reply is the last, and the
 * process exits once it is sent. A failure ends the process,
 * which the fleet reports. Call once the process has loaded and connected:
 * this announces it ready.
 */
export function answerFleet<To extends Message, From extends Message>(handle: (message: To) => Promise<From>, log: Logger): void {
  let stopped = false;
  process.on('message', (message: To) => {
    handle(message).then(
      (reply) => {
        if (reply.type !== 'stopped') {
          process.send!(reply);
          return;
        }
        stopped = true;
        // Exit once the reply is out, rather than when the event loop
        // empties: a peer runner replaced after a fatal error may be stuck
        // in a graceful shutdown that never ends (peerWorkerProcess.ts),
        // and the fleet waits for this process's exit.
        process.send!(reply, () => process.exit(0));
      },
      (error) => {
        log.error({ err: error }, `benchmark worker failed on ${message.type}`);
        process.exit(1);
      },
    );
  });
  // An orphan (the benchmark was killed) must not keep working.
  process.on('disconnect', () => {
    if (!stopped) process.exit(1);
  });
  process.send!({ type: 'ready' } satisfies FromWorker);
}
