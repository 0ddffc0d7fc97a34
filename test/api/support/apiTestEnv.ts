import { afterAll, beforeAll } from 'vitest';
import type { TokenRole } from '../../../migrations/schema.ts';
import { ROLES } from '../../../src/api/auth/roles.ts';
import { createToken } from '../../../src/api/auth/tokens.ts';
import { ApiServer } from '../../../src/server/ApiServer.ts';
import { loadConfig } from '../../../src/config.ts';
import { SlipwayWorker } from '../../../src/worker/SlipwayWorker.ts';
import { createTestDatabase, testLog } from '../../helpers/testDatabase.ts';
import { ApiClient } from './ApiClient.ts';

type TestDatabase = Awaited<ReturnType<typeof createTestDatabase>>;

export interface ApiTestEnv {
  readonly database: TestDatabase;
  /** The server every test of the file talks to. */
  readonly server: ApiServer;
  /** A client per role (tokens named after their role), and one without a token. */
  readonly as: Readonly<Record<TokenRole, ApiClient>>;
  readonly anonymous: ApiClient;
  /** Another server on the same database with its own settings (stopped after the file). */
  startServer(env: Record<string, string>): Promise<ApiServer>;
  /** Runs or stops the file's in-process worker (running at the start when asked for). */
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
}

/** Settings for test servers: a free port, and failed authentication never limited unless a test asks. */
const TEST_SETTINGS = { SLIPWAY_API_PORT: '0', SLIPWAY_API_AUTH_FAILURES_PER_MINUTE: '100000' };

/**
 * A test file's own database, a real API server on a free port, a token for
 * each role, and (optionally) a worker in the test process.
 */
export function apiTestEnv(options: { worker: boolean; env?: Record<string, string> } = { worker: true }): ApiTestEnv {
  const state = {} as {
    database: TestDatabase;
    server: ApiServer;
    as: Record<TokenRole, ApiClient>;
    anonymous: ApiClient;
    worker?: SlipwayWorker;
    extra: ApiServer[];
  };
  const configFor = (env: Record<string, string>) =>
    loadConfig({ DATABASE_URL: state.database.url, LOG_LEVEL: 'warn', ...TEST_SETTINGS, ...options.env, ...env });

  const env: ApiTestEnv = {
    get database() {
      return state.database;
    },
    get server() {
      return state.server;
    },
    get as() {
      return state.as;
    },
    get anonymous() {
      return state.anonymous;
    },
    async startServer(overrides) {
      const server = await ApiServer.start(state.database, configFor(overrides), testLog);
      state.extra.push(server);
      return server;
    },
    async startWorker() {
      state.worker ??= await SlipwayWorker.start(state.database, configFor({}), testLog);
    },
    async stopWorker() {
      await state.worker?.stop();
      state.worker = undefined;
    },
  };

  beforeAll(async () => {
    state.extra = [];
    state.database = await createTestDatabase({ poolSize: 30 });
    state.server = await ApiServer.start(state.database, configFor({}), testLog);
    const entries = await Promise.all(
      ROLES.map(async (role) => {
        const { secret } = await createToken(state.database.db, { name: role, role }, 'test');
        return [role, new ApiClient(state.server.url, secret)] as const;
      }),
    );
    state.as = Object.fromEntries(entries) as Record<TokenRole, ApiClient>;
    state.anonymous = new ApiClient(state.server.url, null);
    if (options.worker) await env.startWorker();
  });

  afterAll(async () => {
    await env.stopWorker();
    for (const server of state.extra ?? []) await server.stop();
    await state.server?.stop();
    await state.database?.drop();
  });

  return env;
}
