import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config.ts';
import type { Database } from '../db/Database.ts';
import type { Logger } from '../log.ts';
import { answerScrape, scrapeSettings } from '../metrics/scrape.ts';

/**
 * The small HTTP listener of a process that runs a worker but no API
 * (`slipway worker` with SLIPWAY_METRICS_PORT): `GET /metrics` and nothing
 * else, so Prometheus scrapes each worker for what that worker did.
 */
export class MetricsListener {
  private constructor(
    private readonly server: Server,
    /** e.g. http://127.0.0.1:9480/metrics */
    readonly url: string,
  ) {}

  static async start(database: Pick<Database, 'db' | 'pool'>, config: Config, port: number, log: Logger): Promise<MetricsListener> {
    const settings = scrapeSettings(config);
    const server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://metrics').pathname;
      if (request.method !== 'GET' || path !== '/metrics') {
        response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('only GET /metrics is served here\n');
        return;
      }
      answerScrape(database, settings, request.headers.authorization).then(
        (scrape) => response.writeHead(scrape.status, { 'content-type': scrape.contentType }).end(scrape.body),
        (error: unknown) => {
          log.warn({ err: error }, 'metrics scrape failed');
          response.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics unavailable: the database did not answer\n');
        },
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, config.SLIPWAY_API_HOST, () => resolve());
    });
    const { address, port: bound } = server.address() as AddressInfo;
    const host = address.includes(':') ? `[${address}]` : address;
    return new MetricsListener(server, `http://${host}:${bound}/metrics`);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
