import type { FastifyInstance } from 'fastify';
import type { ChangeFeed } from './changeFeed.ts';

/** How long a browser waits before reconnecting a dropped stream. */
const RETRY_MS = 3000;

/**
 * `GET /events`: server-sent events for a signed-in page, one stream per
 * open page for as long as it stays open. Each message is `changed` with a
 * JSON array of what changed; the stream ends when the client leaves or the
 * server stops (`stopping`), so a stopping server is not held open by pages.
 */
export async function eventStreamRoutes(
  app: FastifyInstance,
  feed: ChangeFeed,
  options: { stopping: AbortSignal; heartbeatMs: number },
): Promise<void> {
  const { stopping, heartbeatMs } = options;
  app.get('/events', { config: { webAction: 'read' } }, async (_request, reply) => {
    reply.hijack();
    const out = reply.raw;
    out.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // Tells nginx and friends not to buffer the stream.
      'x-accel-buffering': 'no',
    });
    out.write(`retry: ${RETRY_MS}\n: connected\n\n`);
    const unsubscribe = feed.subscribe((changes) => out.write(`event: changed\ndata: ${JSON.stringify(changes)}\n\n`));
    // A comment line now and then keeps proxies and browsers from closing a quiet stream.
    const heartbeat = setInterval(() => out.write(': heartbeat\n\n'), heartbeatMs);
    const end = () => {
      clearInterval(heartbeat);
      unsubscribe();
      stopping.removeEventListener('abort', end);
      if (!out.writableEnded) out.end();
    };
    out.once('close', end);
    stopping.addEventListener('abort', end);
    if (stopping.aborted) end();
  });
}
