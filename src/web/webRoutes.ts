import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../api/ApiContext.ts';
import { assetRoutes } from './assets.ts';
import { ChangeFeed } from './changeFeed.ts';
import { installCookies } from './cookies.ts';
import { eventStreamRoutes } from './eventStream.ts';
import { installFormParsing } from './forms.ts';
import { commandForms } from './pages/commandForms.ts';
import { commandPage } from './pages/commandPage.ts';
import { blueprintPage } from './pages/blueprintPage.ts';
import { leasePage } from './pages/leasePage.ts';
import { listPages } from './pages/lists.ts';
import { overviewPage } from './pages/overview.ts';
import { resourcePage } from './pages/resourcePage.ts';
import { signInPages } from './pages/signIn.ts';
import { teamsPage } from './pages/teamsPage.ts';
import { installWebAuthentication } from './webAuth.ts';
import { installWebErrors } from './webErrors.ts';

/**
 * The web UI, one fastify plugin beside the API's: server-rendered pages
 * under `/` (the API keeps `/v1/...`), with its own session authentication,
 * HTML errors and form parsing, all encapsulated in this plugin so the API's
 * routes are untouched by them.
 */
export async function webRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;
  installWebErrors(app);
  await installCookies(app);
  installWebAuthentication(app, db);
  installFormParsing(app, context.config.SLIPWAY_API_BODY_LIMIT_BYTES);
  const feed = new ChangeFeed(context.notices);
  app.addHook('onClose', async () => feed.close());

  await assetRoutes(app);
  await signInPages(app, context);
  await overviewPage(app, db);
  await listPages(app, db);
  await blueprintPage(app, db);
  await leasePage(app, db);
  await resourcePage(app, db);
  await teamsPage(app, db);
  await commandPage(app, db);
  await commandForms(app, context);
  await eventStreamRoutes(app, feed, { stopping: context.stopping, heartbeatMs: context.config.SLIPWAY_WEB_HEARTBEAT_MS });
}
