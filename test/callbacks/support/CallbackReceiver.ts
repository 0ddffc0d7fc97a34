import { once } from 'node:events';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedCallback {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The raw body, as signed. */
  readonly body: string;
  readonly at: Date;
}

/** What the receiver answers on one path: a status, and a Location for redirects; or no answer at all (`hang`). */
export type Answer = { readonly status: number; readonly location?: string } | { readonly hang: true };

/**
 * A real HTTP server on a free loopback port that records every request and
 * answers, per path, from a script of answers (then 204 No Content).
 */
export class CallbackReceiver {
  private readonly log: ReceivedCallback[] = [];
  private readonly scripts = new Map<string, Answer[]>();

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<CallbackReceiver> {
    const server = http.createServer();
    const receiver = new CallbackReceiver(server);
    server.on('request', (request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const path = request.url ?? '/';
        receiver.log.push({ path, headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), at: new Date() });
        const answer = receiver.scripts.get(path)?.shift() ?? { status: 204 };
        // A hung request stays open until the receiver closes.
        if ('hang' in answer) return;
        response.writeHead(answer.status, answer.location ? { location: answer.location } : {}).end();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return receiver;
  }

  url(path: string, host = '127.0.0.1'): string {
    return `http://${host}:${(this.server.address() as AddressInfo).port}${path}`;
  }

  /** The next answers on `path`, in order. */
  script(path: string, answers: readonly Answer[]): void {
    this.scripts.set(path, [...answers]);
  }

  received(path?: string): ReceivedCallback[] {
    return this.log.filter((r) => path === undefined || r.path === path);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close');
  }
}
