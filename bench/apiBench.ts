import { fork } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { createToken } from '../src/api/auth/tokens.ts';
import type { Database } from '../src/db/Database.ts';
import { HttpJsonClient } from '../test/helpers/HttpJsonClient.ts';
import type { OpenLoad } from './latency.ts';
import { createActiveLeases } from './leases.ts';
import { openLoop, percentiles, PercentilesSchema, pollUntil, runClients, throughput, type Throughput } from './measure.ts';
import type { SlipwaySystem } from './SlipwaySystem.ts';

/**
 * The HTTP API's figures. The server runs in a process of its own on a
 * free port (bench/apiServerProcess.ts), started once for the whole run as
 * a deployment's runs for days: a freshly started server is still compiling
 * its code (V8's optimizing compiler) for its first several thousand
 * requests, which ran about a quarter slower than the same server's later
 * ones, and no long-running deployment pays that. Callers are
 * HttpJsonClients with an operator token, each with keep-alive connections
 * of its own, like separate callers.
 *
 * Call measureApiReleases before the worker fleet starts (like (b), so the
 * releases compete with nothing), and measureApiWait with the fleet running.
 */

export const ApiWaitSchema = z.object({
  targetRate: z.number(),
  requests: z.number(),
  achievedRate: z.number(),
  /** Answered 202: the wait ran out before the release's tree settled (counted in the percentiles at the time they took). */
  timedOut: z.number(),
  ...PercentilesSchema.shape,
});
export type ApiWait = z.infer<typeof ApiWaitSchema>;

/** `?wait` of (h), seconds: long enough that a slow release is timed, not cut off. */
const WAIT_S = 30;
/**
 * Connections of the (h) caller. A waiting request holds its connection
 * until answered, so an open loop needs one per request in flight; past
 * this many in flight, requests queue here, and that time counts too.
 */
const WAIT_CONNECTIONS = 500;
const SETTLE_TIMEOUT_MS = 30 * 60_000;

/**
 * (g) Releases per second accepted (202) through the API: one release per
 * lease, `clients` closed loops, one keep-alive connection each. The leases
 * must be pending with no worker running, so every release is a fresh
 * append (a coalesced one would flatter the figure and is an error here).
 * The releases of `warmUpIds` go first, the same way, untimed.
 */
export async function measureApiReleases(
  api: ApiServer,
  leaseIds: readonly number[],
  warmUpIds: readonly number[],
  clients: number,
): Promise<Throughput> {
  const callers = Array.from({ length: clients }, () => api.caller(1));
  // Each closed loop takes a caller of its own for each request, so no two requests share a connection.
  const idle = [...callers];
  const releaseAll = (ids: readonly number[]) =>
    runClients(callers.length, ids.length, async (n) => {
      const caller = idle.pop()!;
      try {
        const answer = await caller.request('POST', `/v1/leases/${ids[n]}/commands`, { kind: 'release' });
        if (answer.status !== 202) throw new Error(`release of lease ${ids[n]}: ${answer.status} ${JSON.stringify(answer.body)}`);
      } finally {
        idle.push(caller);
      }
    });
  await releaseAll(warmUpIds);
  return throughput(leaseIds.length, await releaseAll(leaseIds));
}

/**
 * (h) With the fleet running: releases of active leases through
 * `POST /v1/leases/{id}/commands?wait=30`, open loop at `load.rate` per
 * second for `load.seconds`, each timed from its scheduled time until the
 * answer, which comes when the release (which destroys the lease) and the
 * slot's return it caused have settled.
 */
export async function measureApiWait(api: ApiServer, system: SlipwaySystem, load: OpenLoad, clients: number): Promise<ApiWait> {
  const total = load.rate * load.seconds;
  const { leaseIds } = await createActiveLeases(system, 'api-wait', total, clients);
  const caller = api.caller(WAIT_CONNECTIONS);
  const release = async (n: number) => {
    const answer = await caller.request('POST', `/v1/leases/${leaseIds[n]}/commands?wait=${WAIT_S}`, { kind: 'release' });
    if (answer.status !== 200 && answer.status !== 202) throw new Error(`release of lease ${leaseIds[n]} answered ${answer.status}`);
    return { at: performance.now(), settled: answer.status === 200 };
  };
  const sent = await system.whileRunning(openLoop(total, load.rate, release));
  await system.whileRunning(pollUntil('the API releases to settle', () => system.quiet(), SETTLE_TIMEOUT_MS));
  return {
    targetRate: load.rate,
    requests: total,
    achievedRate: sent.achievedRate,
    timedOut: sent.results.filter((answer) => !answer.settled).length,
    ...percentiles(sent.results.map((answer, n) => answer.at - sent.dueAt[n]!)),
  };
}

const SERVER_MODULE = fileURLToPath(new URL('./apiServerProcess.ts', import.meta.url));

/** The benchmark's API server: it makes callers, each with its own keep-alive connections and an operator token. */
export interface ApiServer {
  caller(connections: number): HttpJsonClient;
  /** Closes the callers it made and stops the server's process. */
  stop(): Promise<void>;
}

/**
 * Starts the API server in a process of its own, with a pool connection per
 * client and a few more (the bench's figures run `clients` callers at once).
 */
export async function startApiServer(database: Database, clients: number): Promise<ApiServer> {
  const child = fork(SERVER_MODULE, [], {
    execArgv: ['--import', 'tsx'],
    env: {
      ...process.env,
      DATABASE_URL: database.url,
      SLIPWAY_API_PORT: '0',
      SLIPWAY_API_BACKLOG_LIMIT: '100000000',
      BENCH_API_POOL: String(clients + 4),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    },
  });
  const callers: HttpJsonClient[] = [];
  const stop = async () => {
    for (const caller of callers) caller.close();
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.send('stop');
    await exited;
  };
  try {
    const [ready] = (await once(child, 'message')) as [{ url: string }];
    const name = `bench-${Date.now().toString(36)}`;
    const { secret } = await createToken(database.db, { name, role: 'operator' }, 'bench');
    const caller = (connections: number) => {
      const made = new HttpJsonClient(ready.url, secret, { connections });
      callers.push(made);
      return made;
    };
    return { caller, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
