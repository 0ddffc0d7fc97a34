import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../db/Database.ts';
import { ProcessHealth } from '../health/ProcessHealth.ts';
import type { Logger } from '../log.ts';
import { AppendBatcher } from '../queue/AppendBatcher.ts';
import { NoticeListener } from '../read/CommandNotices.ts';
import { CommandTreeReads } from '../read/CommandTreeReads.ts';
import type { ApiContext } from '../api/ApiContext.ts';
import { installAuthentication } from '../api/auth/authenticate.ts';
import { TOKEN_REVOKED_CHANNEL } from '../db/channels.ts';
import { TrustedTokens } from '../api/auth/TrustedTokens.ts';
import { Backpressure } from '../api/backpressure.ts';
import { installBodyParsing } from '../api/bodyParsing.ts';
import { installErrorHandling, sendError } from '../api/errors.ts';
import { pruneKeys } from '../api/idempotency.ts';
import { requestForLog } from '../api/requestLog.ts';
import { blueprintRoutes } from '../api/routes/blueprints.ts';
import { commandRoutes } from '../api/routes/commands.ts';
import { healthRoutes } from '../api/routes/health.ts';
import { leaseRoutes } from '../api/routes/leases.ts';
import { installRequestMetrics, metricsRoutes } from '../api/routes/metrics.ts';
import { resourceRoutes } from '../api/routes/resources.ts';
import { teamRoutes } from '../api/routes/teams.ts';
import { reservationRoutes } from '../api/routes/reservations.ts';
import { installTypedRoutes } from '../api/typedRoutes.ts';
import { webRoutes } from '../web/webRoutes.ts';

/** Route plugins, in registration order: the API's, then the web UI's (pages under `/`, see src/web/). */
const ROUTES = [
  healthRoutes,
  metricsRoutes,
  blueprintRoutes,
  leaseRoutes,
  resourceRoutes,
  commandRoutes,
  teamRoutes,
  reservationRoutes,
  webRoutes,
] as const;

const PRUNE_KEYS_EVERY_MS = 3_600_000;

/** A caller's X-Request-Id is kept (and recorded on its commands) when it is a sane token; otherwise we make one. */
const REQUEST_ID = /^[\w.:-]{1,100}$/;

/** Builds the fastify app (routes, validation, authentication, errors) without listening. */
export async function buildApp(context: ApiContext, log: Logger): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: log.child({ component: 'api' }, { serializers: { req: requestForLog } }) as FastifyBaseLogger,
    // fastify's lines per request; our failures are logged by the error handler either way (errors.ts).
    logController: new LogController({ disableRequestLogging: !context.config.SLIPWAY_LOG_REQUESTS }),
    bodyLimit: context.config.SLIPWAY_API_BODY_LIMIT_BYTES,
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
    // A URL fastify cannot route (bad percent-encoding, a segment too long) is answered like every other
    // error; no hook runs for it, so its request id header is set here.
    frameworkErrors: (error, request, reply) => sendError(request, reply.header('x-request-id', request.id), error),
  });
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  installRequestMetrics(app);
  installErrorHandling(app);
  installBodyParsing(app);
  await installTypedRoutes(app);
  installAuthentication(app, context.tokens, context.config.SLIPWAY_API_AUTH_FAILURES_PER_MINUTE);
  for (const routes of ROUTES) await app.register(async (scope) => routes(scope, context));
  return app;
}

/** A context around a process's database, settings, LISTEN connection and health: its backpressure and append batcher are made here. */
export function apiContext(parts: Omit<ApiContext, 'backpressure' | 'appends' | 'trees'>, log: Logger): ApiContext {
  const { config, database } = parts;
  return {
    ...parts,
    backpressure: new Backpressure({ queueDepth: config.SLIPWAY_API_QUEUE_DEPTH_LIMIT, backlog: config.SLIPWAY_API_BACKLOG_LIMIT }),
    appends: new AppendBatcher(database.pool, database.db, log),
    trees: new CommandTreeReads(database.pool),
  };
}

/** The HTTP API of one process: the app, its one LISTEN connection, and its housekeeping. */
export class ApiServer {
  private pruning: NodeJS.Timeout | undefined;
  /** The pruning in progress, awaited by stop(): it must not outlive the database it queries. */
  private pruned: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly app: FastifyInstance,
    private readonly notices: NoticeListener,
    private readonly stopping: AbortController,
    /** Where it listens, e.g. http://127.0.0.1:7480. */
    readonly url: string,
  ) {}

  static async start(database: Database, config: Config, log: Logger, health = new ProcessHealth(log)): Promise<ApiServer> {
    const tokens = new TrustedTokens(database.db);
    const notices = await NoticeListener.open(database.pool, health.part('listen'), { [TOKEN_REVOKED_CHANNEL]: tokens.revocations });
    await database.openConnections();
    const stopping = new AbortController();
    const context = apiContext({ database, config, notices, tokens, stopping: stopping.signal, health }, log);
    const app = await buildApp(context, log);
    try {
      await app.listen({ host: config.SLIPWAY_API_HOST, port: config.SLIPWAY_API_PORT });
    } catch (error) {
      await notices.close();
      throw error;
    }
    const { address, port } = app.server.address() as AddressInfo;
    const host = address.includes(':') ? `[${address}]` : address;
    const server = new ApiServer(app, notices, stopping, `http://${host}:${port}`);
    // Housekeeping starts only once the server is up: a start that fails
    // (its port taken) closes the database at once, with nothing querying it.
    server.pruneKeysEvery(PRUNE_KEYS_EVERY_MS, () =>
      pruneKeys(database.db, config.SLIPWAY_API_IDEMPOTENCY_HOURS).then(
        (n) => n > 0 && log.info({ pruned: n }, 'forgot old idempotency keys'),
        (error: unknown) => log.warn({ err: error }, 'pruning idempotency keys failed'),
      ),
    );
    return server;
  }

  private pruneKeysEvery(ms: number, prune: () => Promise<unknown>): void {
    const run = () => {
      this.pruned = this.pruned.then(prune);
    };
    run();
    this.pruning = setInterval(run, ms);
    this.pruning.unref();
  }

  /** Stops taking requests; requests still waiting answer at once with what they have. */
  async stop(): Promise<void> {
    clearInterval(this.pruning);
    this.stopping.abort();
    await this.app.close();
    await this.notices.close();
    await this.pruned;
  }
}
