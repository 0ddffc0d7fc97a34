import os from 'node:os';
import { sql } from 'kysely';
import { performance } from 'node:perf_hooks';
import { createLogger } from '../src/log.ts';
import { measureApiLatency, measureApiReleases } from './apiBench.ts';
import { measureAppend } from './append.ts';
import { measureBaseline } from './baseline.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { measureDrain } from './drain.ts';
import { createLeases, createSimulatedBlueprint } from './fixtures.ts';
import { measureGraphileWorker } from './graphileBaseline.ts';
import { measureLatency } from './latency.ts';
import { describeMachine } from './machine.ts';
import { formatReport, reproduceCommand } from './report.ts';
import { loadBenchSettings } from './settings.ts';
import { WorkerFleet } from './WorkerFleet.ts';

/**
 * `npm run bench`: Slipway's throughput and latency against the durable
 * insert rate of the same server, in one run on a fresh database.
 *
 * Order of the phases: (a) baseline; leases created with no worker running,
 * so they stay pending; (b) one release appended per lease; (g) as many
 * releases of other pending leases through the HTTP API; the workers start
 * and (c) drain that backlog while (f) their memory is sampled; (e) the
 * latency run with the workers still up, then (h) the API's response times;
 * the workers stop and (d) graphile-worker runs alone. Progress goes to stderr, the report to stdout.
 */
const runStarted = performance.now();
const settings = loadBenchSettings();
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench');
const progress = (step: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${step}\n`);

progress('opening a fresh database');
// One connection per client, plus the progress polls'.
const bench = await openBenchDatabase(log, settings.BENCH_CLIENTS + 2);
const { database } = bench;
let fleet: WorkerFleet | undefined;
try {
  const machine = await describeMachine(database.pool);

  progress(`(a) ${settings.BENCH_LEASES} durable inserts from ${settings.BENCH_CLIENTS} clients`);
  const baseline = await measureBaseline(database.pool, settings.BENCH_CLIENTS, settings.BENCH_LEASES);

  progress(`creating ${settings.BENCH_LEASES} pending leases (no worker running)`);
  // Never asked for capacity: each lease's release cancels its queued allocate.
  const blueprintId = await createSimulatedBlueprint(database.db, 'bench-drain', { maxResources: 1, leasesPerResource: 1 });
  const leaseIds = await createLeases(database.db, blueprintId, settings.BENCH_LEASES, settings.BENCH_CLIENTS);
  // Statistics for the tables just filled, as a running database has them:
  // otherwise (b) is measured with whatever plans the empty tables' numbers
  // gave, and its figure depends on whether autovacuum has got round to them.
  await sql`analyze`.execute(database.db);

  progress(`(b) appending ${leaseIds.length} releases from ${settings.BENCH_CLIENTS} clients`);
  const append = await measureAppend(database.db, leaseIds, settings.BENCH_CLIENTS);

  progress(`(g) ${settings.BENCH_LEASES} releases of fresh pending leases through the HTTP API`);
  const apiLeaseIds = await createLeases(database.db, blueprintId, settings.BENCH_LEASES, settings.BENCH_CLIENTS);
  const apiReleases = await measureApiReleases(database, apiLeaseIds, settings.BENCH_CLIENTS);

  progress(`launching ${settings.BENCH_WORKERS} worker processes`);
  fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, database.url);
  progress('(c) draining the backlog');
  const drain = await measureDrain(database.db, fleet);

  progress(`(e) ${settings.BENCH_LATENCY_RATE} releases/s for ${settings.BENCH_LATENCY_SECONDS} s (after making their leases active)`);
  const latency = await measureLatency(
    database,
    fleet,
    { rate: settings.BENCH_LATENCY_RATE, seconds: settings.BENCH_LATENCY_SECONDS },
    settings.BENCH_CLIENTS,
  );
  progress(`(h) API releases at ${settings.BENCH_LATENCY_RATE / 2}/s for ${settings.BENCH_LATENCY_SECONDS} s, then ?wait samples`);
  const apiLatency = await measureApiLatency(database, fleet, {
    rate: settings.BENCH_LATENCY_RATE / 2,
    seconds: settings.BENCH_LATENCY_SECONDS,
    waitSamples: 100,
    clients: settings.BENCH_CLIENTS,
  });
  await fleet.stop();
  fleet = undefined;

  progress(`(d) graphile-worker on ${settings.BENCH_LEASES} no-op jobs`);
  const graphile = await measureGraphileWorker(database.pool, database.url, settings.BENCH_LEASES, log);

  const results = {
    machine,
    server: bench.server,
    settings,
    baseline,
    append,
    drain,
    graphile,
    latency,
    apiReleases,
    apiLatency,
    loadAverageAtEnd: os.loadavg()[0]!,
    runSeconds: (performance.now() - runStarted) / 1000,
  };
  console.log(formatReport(results, reproduceCommand(settings)));
} finally {
  fleet?.kill();
  progress('dropping the database');
  await bench.close();
}
