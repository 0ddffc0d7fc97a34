import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { CODE_ROOT } from '../packageRoot.ts';

/**
 * The UI's only assets, hand-written and served from memory: no build
 * step, nothing fetched from elsewhere. Their URLs carry no version, so
 * browsers revalidate them (ETag) instead of caching them for good.
 */
const ASSETS = [
  { url: '/assets/app.css', file: 'app.css', type: 'text/css; charset=utf-8' },
  { url: '/assets/app.js', file: 'app.js', type: 'text/javascript; charset=utf-8' },
  { url: '/assets/favicon.svg', file: 'favicon.svg', type: 'image/svg+xml' },
] as const;

export async function assetRoutes(app: FastifyInstance): Promise<void> {
  for (const { url, file, type } of ASSETS) {
    const body = readFileSync(path.join(CODE_ROOT, 'src', 'web', 'assets', file));
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    app.get(url, async (request, reply) => {
      reply.headers({ 'content-type': type, etag, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' });
      if (request.headers['if-none-match'] === etag) return reply.code(304).send();
      return reply.send(body);
    });
  }
}
