import { fork } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { Database } from '../src/db/Database.ts';
import type { HttpJsonClient } from '../test/helpers/HttpJsonClient.ts';
import { type ApiCallers, apiCallers, type CallerMaker } from './apiCallers.ts';
import type { OpenLoad } from './latency.ts';
import { createActiveLeases } from './leases.ts';
import { openLoop, percentiles, PercentilesSchema, pollUntil, runClients, throughput, ThroughputSchema, type Throughput } from './measure.ts';
import type { SlipwaySystem } from './SlipwaySystem.ts';

/**
 * The HTTP API's figures. For (g) and (h) the server runs in a process of
 * its own on a free port (bench/apiServerProcess.ts), started once for the
 * whole run as a deployment's runs for days: a freshly started server is
 * still compiling its code (V8's optimizing compiler) for its first several
 * thousand requests, which ran about a quarter slower than the same
 * server's later ones, and no long-running deployment pays that. (j) calls
 * `slipway start`'s own API through the same functions (serviceBench.ts).
 * Callers are HttpJsonClients, each with keep-alive connections of its
 * own, like separate callers.
 *
 * Call measureApiReleases before the worker fleet starts (like (b), so the
 * releases compete with nothing), and measureApiWait with the fleet running.
 */

export const ApiWaitSchema = z.object({
  targetRate: z.number(),
  requests: z.number(),
  achievedRate: z.number(),
  /** Requests per second from the first scheduled send until the last answer: below the target, the service fell behind. */
  settledRate: z.number(),
  /** Answered 202: the wait ran out before the release's tree settled (counted in the percentiles at the time they took). */
  timedOut: z.number(),
  ...PercentilesSchema.shape,
});
export type ApiWait = z.infer<typeof ApiWaitSchema>;

/** Releases with `?wait` by closed-loop callers: each answered when its release's tree settled. */
export const ApiWaitThroughputSchema = ThroughputSchema.extend({
  clients: z.number(),
  /** Answered 202: the wait ran out first (counted, at the time they took). */
  timedOut: z.number(),
});
export type ApiWaitThroughput = z.infer<typeof ApiWaitThroughputSchema>;

/** `?wait` of (h) and (j), seconds: long enough that a slow request is timed, not cut off. */
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
  api: CallerMaker,
  leaseIds: readonly number[],
  warmUpIds: readonly number[],
  clients: number,
): Promise<Throughput> {
  const loops = closedLoops(api, clients);
  const releaseAll = (ids: readonly number[]) =>
    loops(ids.length, async (caller, n) => {
      const answer = await caller.request('POST', `/v1/leases/${ids[n]}/commands`, { kind: 'release' });
      if (answer.status !== 202) throw new Error(`release of lease ${ids[n]}: ${answer.status} ${JSON.stringify(answer.body)}`);
    });
  await releaseAll(warmUpIds);
  return throughput(leaseIds.length, await releaseAll(leaseIds));
}

/**
 * `POST /v1/leases/{id}/commands?wait=30` of a release: answered 200 when
 * the release (which destroys the lease) and the slot's return it caused
 * have settled, 202 when the wait ran out first; anything else fails the run.
 */
export async function releaseWaiting(caller: HttpJsonClient, leaseId: number): Promise<{ settled: boolean }> {
  const answer = await caller.request('POST', `/v1/leases/${leaseId}/commands?wait=${WAIT_S}`, { kind: 'release' });
  if (answer.status !== 200 && answer.status !== 202) {
    throw new Error(`release of lease ${leaseId} answered ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  return { settled: answer.status === 200 };
}

/**
 * `POST /v1/leases?wait=30` on the blueprint: answered 200 when the lease
 * is active (anything else, a lease that failed or a wait that ran out,
 * fails the run); returns the lease's id.
 */
export async function createWaiting(caller: HttpJsonClient, blueprintId: number): Promise<number> {
  const answer = await caller.request<{ lease: { id: number; state: string } }>('POST', `/v1/leases?wait=${WAIT_S}`, { blueprint: blueprintId });
  if (answer.status !== 200 || answer.body.lease.state !== 'active') {
    throw new Error(`lease create on blueprint ${blueprintId} answered ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  return answer.body.lease.id;
}

/**
 * (h), (j) With a worker running: releases of active leases (made untimed
 * on a new blueprint named `name`) through `releaseWaiting`, open loop at
 * `load.rate` per second for `load.seconds`, each timed from its scheduled
 * time until its answer.
 */
export async function measureApiWait(api: CallerMaker, system: SlipwaySystem, name: string, load: OpenLoad, clients: number): Promise<ApiWait> {
  const total = load.rate * load.seconds;
  const { leaseIds } = await createActiveLeases(system, name, total, clients);
  const caller = api.caller(WAIT_CONNECTIONS);
  const release = async (n: number) => ({ ...(await releaseWaiting(caller, leaseIds[n]!)), at: performance.now() });
  const sent = await system.whileRunning(openLoop(total, load.rate, release));
  await system.whileRunning(pollUntil('the API releases to settle', () => system.quiet(), SETTLE_TIMEOUT_MS));
  const lastAnswer = sent.results.reduce((latest, answer) => Math.max(latest, answer.at), 0);
  return {
    targetRate: load.rate,
    requests: total,
    achievedRate: sent.achievedRate,
    settledRate: total / ((lastAnswer - sent.dueAt[0]!) / 1000),
    timedOut: sent.results.filter((answer) => !answer.settled).length,
    ...percentiles(sent.results.map((answer, n) => answer.at - sent.dueAt[n]!)),
  };
}

/**
 * (j) With a worker running: `count` releases of active leases (made
 * untimed on a new blueprint named `name`) through `releaseWaiting`, from
 * `clients` closed loops, each sending its next release when the last one
 * was answered. Timed from the first request until the last answer.
 */
export async function measureApiWaitClosedLoop(
  api: CallerMaker,
  system: SlipwaySystem,
  name: string,
  count: number,
  clients: number,
): Promise<ApiWaitThroughput> {
  const { leaseIds } = await createActiveLeases(system, name, count, clients);
  let timedOut = 0;
  const seconds = await system.whileRunning(
    closedLoops(api, clients)(count, async (caller, n) => {
      if (!(await releaseWaiting(caller, leaseIds[n]!)).settled) timedOut++;
    }),
  );
  await system.whileRunning(pollUntil('the API releases to settle', () => system.quiet(), SETTLE_TIMEOUT_MS));
  return { ...throughput(count, seconds), clients, timedOut };
}

/**
 * `clients` closed loops, each with a caller of its own (one keep-alive
 * connection, so no two requests share one): the returned function runs
 * `send(caller, 0) … send(caller, total - 1)` on them and returns how long
 * that took, in seconds.
 */
function closedLoops(api: CallerMaker, clients: number) {
  const idle = Array.from({ length: clients }, () => api.caller(1));
  return (total: number, send: (caller: HttpJsonClient, n: number) => Promise<void>) =>
    runClients(clients, total, async (n) => {
      const caller = idle.pop()!;
      try {
        await send(caller, n);
      } finally {
        idle.push(caller);
      }
    });
}

const SERVER_MODULE = fileURLToPath(new URL('./apiServerProcess.ts', import.meta.url));

/** The benchmark's own API server: it makes callers with an operator token. */
export interface ApiServer extends CallerMaker {
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
  let callers: ApiCallers | undefined;
  const stop = async () => {
    callers?.close();
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.send('stop');
    await exited;
  };
  try {
    const [ready] = (await once(child, 'message')) as [{ url: string }];
    callers = await apiCallers(database.db, ready.url, 'operator');
    return { caller: callers.caller, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
