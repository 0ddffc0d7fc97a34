import { fork } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createToken } from '../src/api/auth/tokens.ts';
import { HttpJsonClient } from '../test/helpers/HttpJsonClient.ts';
import type { Database } from '../src/db/Database.ts';
import { createActiveLeases } from './fixtures.ts';
import { allQueuesEmpty } from './commandCounts.ts';
import { percentile, pollUntil, runClients, throughput, timed, type Throughput } from './measure.ts';
import type { WorkerFleet } from './WorkerFleet.ts';

/**
 * The HTTP API's figures. The server runs in a process of its own on a
 * free port (bench/apiServerProcess.ts); each client is an HttpJsonClient
 * with one keep-alive connection and an operator token, like a separate
 * caller.
 *
 * Call measureApiReleases before the worker fleet starts (like (b), so the
 * releases compete with nothing), and measureApiLatency with the fleet
 * running (like (e)).
 */

export interface ApiLatencyResult {
  readonly requests: number;
  readonly targetRate: number;
  readonly achievedRate: number;
  /** Response time of POST …/commands (202) at the steady load, from each request's scheduled time. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Response time of POST …/commands?wait=10 for a release that completes at once (zero-latency driver), one at a time. */
  readonly waitSamples: number;
  readonly waitP50Ms: number;
  readonly waitP99Ms: number;
}

/** The longest a `wait` sample may take before the run fails instead of reporting nonsense. */
const WAIT_S = 10;
/** How long the open-loop releases of (h) may take to settle before the wait samples start. */
const BACKLOG_TIMEOUT_MS = 10 * 60_000;

/**
 * Releases per second accepted (202) through the API: one release per
 * lease, `clients` closed loops. The leases must be pending with no worker
 * running, so every release is a fresh append (a coalesced one would
 * flatter the figure and is an error here).
 */
export async function measureApiReleases(database: Database, leaseIds: readonly number[], clients: number): Promise<Throughput> {
  return withApi(database, clients, async (callers) => {
    // Each closed loop takes a caller of its own for each request, so no two requests share a connection.
    const idle = [...callers];
    const seconds = await runClients(callers.length, leaseIds.length, async (n) => {
      const caller = idle.pop()!;
      try {
        const answer = await caller.request('POST', `/v1/leases/${leaseIds[n]}/commands`, { kind: 'release' });
        if (answer.status !== 202) throw new Error(`release of lease ${leaseIds[n]}: ${answer.status} ${JSON.stringify(answer.body)}`);
      } finally {
        idle.push(caller);
      }
    });
    return throughput(leaseIds.length, seconds);
  });
}

/**
 * With the fleet running: response times of releases sent open-loop at
 * `rate` per second for `seconds` (each sent at its scheduled time, whether
 * or not earlier ones have answered), then `waitSamples` releases with
 * `?wait`, one at a time, each answered when its whole tree has settled.
 */
export async function measureApiLatency(
  database: Database,
  fleet: WorkerFleet,
  load: { rate: number; seconds: number; waitSamples: number; clients: number },
): Promise<ApiLatencyResult> {
  const total = load.rate * load.seconds;
  const leaseIds = await fleet.whileRunning(createActiveLeases(database.db, 'bench-api', total + load.waitSamples, load.clients));
  return withApi(database, load.clients, async (callers) => {
    const release = (n: number, query = '') =>
      callers[n % callers.length]!.request('POST', `/v1/leases/${leaseIds[n]}/commands${query}`, { kind: 'release' });

    const started = performance.now();
    const dueAt: number[] = [];
    const answered: Promise<number>[] = [];
    for (let n = 0; n < total; n++) {
      dueAt[n] = started + (n * 1000) / load.rate;
      const early = dueAt[n]! - performance.now();
      if (early > 0) await new Promise((resolve) => setTimeout(resolve, early));
      answered.push(release(n).then((answer) => expectStatus(answer.status, 202, leaseIds[n]!, performance.now())));
    }
    const sendSeconds = (performance.now() - started) / 1000;
    const latencies = (await fleet.whileRunning(Promise.all(answered))).map((at, n) => at - dueAt[n]!);

    // "A command that completes at once" needs workers with nothing else to
    // do: the open-loop releases' trees may still be draining.
    await fleet.whileRunning(pollUntil('the open-loop releases to settle', () => allQueuesEmpty(database.db), BACKLOG_TIMEOUT_MS));
    const waits: number[] = [];
    for (let n = total; n < total + load.waitSamples; n++) {
      const { value, ms } = await timed(() => fleet.whileRunning(release(n, `?wait=${WAIT_S}`)));
      expectStatus(value.status, 200, leaseIds[n]!, 0);
      if ((value.body as { outcome: string }).outcome !== 'settled') throw new Error(`release of lease ${leaseIds[n]} did not settle within ${WAIT_S} s`);
      waits.push(ms);
    }
    return {
      requests: total,
      targetRate: load.rate,
      achievedRate: (total - 1) / sendSeconds,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      waitSamples: waits.length,
      waitP50Ms: percentile(waits, 50),
      waitP99Ms: percentile(waits, 99),
    };
  });
}

function expectStatus(status: number, expected: number, leaseId: number, at: number): number {
  if (status !== expected) throw new Error(`release of lease ${leaseId} answered ${status}, not ${expected}`);
  return at;
}

const SERVER_MODULE = fileURLToPath(new URL('./apiServerProcess.ts', import.meta.url));

/**
 * Runs `work` against an API server in a process of its own (a pool
 * connection per client, and a few more) and `clients` callers, each with
 * one keep-alive connection and an operator token.
 */
async function withApi<T>(database: Database, clients: number, work: (callers: HttpJsonClient[]) => Promise<T>): Promise<T> {
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
  try {
    const [ready] = (await once(child, 'message')) as [{ url: string }];
    const name = `bench-${Date.now().toString(36)}`;
    const { secret } = await createToken(database.db, { name, role: 'operator' }, 'bench');
    const callers = Array.from({ length: clients }, () => new HttpJsonClient(ready.url, secret, { connections: 1 }));
    try {
      return await work(callers);
    } finally {
      callers.forEach((caller) => caller.close());
    }
  } finally {
    child.send('stop');
    if (child.exitCode === null) await once(child, 'exit');
  }
}
