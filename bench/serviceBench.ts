import { z } from 'zod';
import type { Database } from '../src/db/Database.ts';
import type { HttpJsonClient } from '../test/helpers/HttpJsonClient.ts';
import { ApiWaitSchema, ApiWaitThroughputSchema, createWaiting, measureApiWait, measureApiWaitClosedLoop, releaseWaiting } from './apiBench.ts';
import { type ApiCallers, apiCallers } from './apiCallers.ts';
import { EMBEDDED_HOME } from './benchDatabase.ts';
import { commandsByStatus } from './commandCounts.ts';
import { oneAtATime, spread, SpreadSchema } from './measure.ts';
import { ServiceProcess } from './serviceProcess.ts';
import type { BenchSettings } from './settings.ts';
import { SlipwaySystem } from './SlipwaySystem.ts';

/** (j) The service as `slipway start` runs it: one process, the HTTP API and one worker. */
export const ServiceFiguresSchema = z.object({
  /** `POST /v1/leases?wait=30` on a free slot, one at a time on an idle service. */
  idleCreate: SpreadSchema,
  /** `POST /v1/leases/{id}/commands?wait=30` releasing an active lease, one at a time on an idle service. */
  idleRelease: SpreadSchema,
  /** Releases of active leases with `?wait`, open loop at BENCH_API_WAIT_RATE. */
  wait: ApiWaitSchema,
  /** Releases of active leases with `?wait` by BENCH_CLIENTS closed-loop callers. */
  closedLoop: ApiWaitThroughputSchema,
  /** Commands that ended `failed` while the service ran: a `?wait` answer says settled either way. */
  failedCommands: z.number(),
});
export type ServiceFigures = z.infer<typeof ServiceFiguresSchema>;

/** The "20 in a row". */
const IDLE_REQUESTS = 20;
/** Between two idle requests: long enough for whatever the last one left to finish. */
const IDLE_GAP_MS = 100;

/**
 * (j) Starts `slipway start` on the bench database and measures it through
 * its HTTP API with an admin token: the `?wait` releases at load first (open
 * loop, then closed loops), then the idle requests. The loads come first so
 * that the idle figures time a process past its first requests' compiling,
 * as a deployment that runs for days is (docs/decisions/0027-the-benchmark-measures-warm.md). Every lease
 * a figure acts on is made beforehand, untimed, on a fresh blueprint of the
 * simulated driver. Stops the service with SIGTERM; a non-zero exit fails
 * the run.
 */
export async function measureService(database: Database, settings: BenchSettings, progress: (step: string) => void): Promise<ServiceFigures> {
  const clients = settings.BENCH_CLIENTS;
  const load = { rate: settings.BENCH_API_WAIT_RATE, seconds: settings.BENCH_LATENCY_SECONDS };
  progress('(j) starting `slipway start` (the API and one worker, in one process)');
  const failedBefore = (await commandsByStatus(database.db)).failed;
  const service = await ServiceProcess.start(database.url, EMBEDDED_HOME);
  let callers: ApiCallers | undefined;
  try {
    callers = await apiCallers(database.db, service.url, 'admin');
    const system = new SlipwaySystem(database, service);
    progress(`(j) slipway start: releases with ?wait at ${load.rate}/s for ${load.seconds} s (after making their leases active)`);
    const wait = await measureApiWait(callers, system, 'service-wait', load, clients);
    progress(
      `(j) slipway start: ${settings.BENCH_SERVICE_RELEASES} releases with ?wait by ${clients} closed-loop clients (after making their leases active)`,
    );
    const closedLoop = await measureApiWaitClosedLoop(callers, system, 'service-closed-loop', settings.BENCH_SERVICE_RELEASES, clients);
    progress(`(j) slipway start: ${IDLE_REQUESTS} lease creates, then ${IDLE_REQUESTS} releases, with ?wait, one at a time`);
    const idle = await measureIdle(callers.caller(1), system);
    callers.close();
    await service.stop();
    return { ...idle, wait, closedLoop, failedCommands: (await commandsByStatus(database.db)).failed - failedBefore };
  } catch (error) {
    callers?.close();
    await service.kill();
    throw error;
  }
}

/**
 * The idle figures: IDLE_REQUESTS leases created with `?wait` on a warm
 * blueprint's free slots, one at a time, then each released with `?wait`
 * the same way.
 */
async function measureIdle(caller: HttpJsonClient, system: SlipwaySystem): Promise<Pick<ServiceFigures, 'idleCreate' | 'idleRelease'>> {
  const blueprintId = await system.warmPool('service-idle', 2 * IDLE_REQUESTS);
  const leaseIds: number[] = [];
  const creates = await system.whileRunning(
    oneAtATime(IDLE_REQUESTS, IDLE_GAP_MS, async () => {
      leaseIds.push(await createWaiting(caller, blueprintId));
    }),
  );
  const releases = await system.whileRunning(oneAtATime(IDLE_REQUESTS, IDLE_GAP_MS, (n) => releaseWaiting(caller, leaseIds[n]!)));
  return { idleCreate: spread(creates), idleRelease: spread(releases) };
}
