import type { FastifyInstance } from 'fastify';
import { recordHttpRequest } from '../../metrics/metrics.ts';
import { answerScrape, scrapeSettings } from '../../metrics/scrape.ts';
import type { ApiContext } from '../ApiContext.ts';

/**
 * GET /metrics: this process's Prometheus metrics (docs/metrics.md). Public
 * unless SLIPWAY_METRICS_TOKEN is set, because Prometheus scrapes without a
 * Slipway token; it shows counts, never object ids or payloads.
 */
export async function metricsRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const settings = scrapeSettings(context.config);
  app.get('/metrics', async (request, reply) => {
    const scrape = await answerScrape(context.database, settings, request.headers.authorization);
    return reply.code(scrape.status).type(scrape.contentType).send(scrape.body);
  });
}

/** Counts every answered request by its route's URL pattern (one label value per route, not per object). */
export function installRequestMetrics(app: FastifyInstance): void {
  app.addHook('onResponse', async (request, reply) => {
    recordHttpRequest(request.method, request.routeOptions.url ?? 'unrouted', reply.statusCode, reply.elapsedTime);
  });
}
