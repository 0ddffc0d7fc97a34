import os from 'node:os';
import { sql } from 'kysely';
import { performance } from 'node:perf_hooks';
import { createLogger } from '../src/log.ts';
import { measureActiveReleases } from './activeReleases.ts';
import { type ApiServer, measureApiReleases, measureApiWait, startApiServer } from './apiBench.ts';
import { measureAppend } from './append.ts';
import { measureBaseline } from './baseline.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { commandsByStatus } from './commandCounts.ts';
import { measureDrain } from './drain.ts';
import { type Figures, writeFigures } from './figures.ts';
import { createSimulatedBlueprint } from './fixtures.ts';
import { createLeases } from './leases.ts';
import { describeMachine } from './machine.ts';
import { measureExplanations } from './explanations.ts';
import { measurePreemption } from './preemption.ts';
import { runPeer } from './peer/measurePeer.ts';
import { installPeer } from './peer/peerSchema.ts';
import { formatReport, reproduceCommand } from './report.ts';
import { describeServer } from './server.ts';
import { measureService } from './serviceBench.ts';
import { loadBenchSettings } from './settings.ts';
import { SlipwaySystem } from './SlipwaySystem.ts';
import { measureSystem } from './systemFigures.ts';
import { WorkerFleet } from './WorkerFleet.ts';

/**
 * `npm run bench`: Slipway's throughput and latency against the durable
 * insert rate of the same server, and against a peer built on
 * graphile-worker alone, in one run on a fresh database.
 *
 * Order of the phases: (a) baseline; pending leases created with no worker
 * running; (b) one release appended per lease; the API server starts, for
 * the rest of Slipway's figures; (g) as many releases of other pending
 * leases through it, after BENCH_API_WARMUP untimed; Slipway's workers start and drain
 * that backlog (c, the cheap path); then, workers running, (c) the
 * lifecycles and the releases of active leases, (i), (e) at each rate,
 * (h), (k) preemption and (l) explanations; the workers and the API server stop (f: the workers' peak RSS);
 * `slipway start` runs alone for (j); the peer runs the same (c), (i) and
 * (e) tuned, then its releases on graphile-worker's defaults (d).
 * The figures go to .slipway/bench/figures-<start>.json and the report,
 * printed from them, to stdout; progress to stderr.
 */
const runStarted = performance.now();
const startedAt = new Date().toISOString();
const settings = loadBenchSettings();
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench');
const progress = (step: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${step}\n`);

progress('opening a fresh database');
// One connection per client, plus the progress polls', the holders' and the LISTEN connections.
const bench = await openBenchDatabase(log, settings.BENCH_CLIENTS + 4);
const { database } = bench;
let fleet: WorkerFleet | undefined;
let api: ApiServer | undefined;
try {
  const machine = await describeMachine(database.pool);
  const server = await describeServer(database.url, bench.embedded);

  progress(`(a) ${settings.BENCH_LEASES} durable inserts from ${settings.BENCH_CLIENTS} clients`);
  const baseline = await measureBaseline(database.pool, settings.BENCH_CLIENTS, settings.BENCH_LEASES);

  progress(`creating ${settings.BENCH_LEASES} pending leases (no worker running)`);
  const idle = new SlipwaySystem(database);
  // Never served: each lease's request waits in its blueprint's queue, and its release finds it pending.
  const blueprintId = await createSimulatedBlueprint(database.db, 'bench-drain', { maxResources: 1, leasesPerResource: 1 });
  const leaseIds = await createLeases(idle, blueprintId, settings.BENCH_LEASES, settings.BENCH_CLIENTS);
  // Statistics for the tables just filled, as a running database has them:
  // otherwise (b) is measured with whatever plans the empty tables' numbers
  // gave, and its figure depends on whether autovacuum has got round to them.
  await sql`analyze`.execute(database.db);

  progress(`(b) appending ${leaseIds.length} releases from ${settings.BENCH_CLIENTS} clients`);
  const append = await measureAppend(database.db, leaseIds, settings.BENCH_CLIENTS);

  progress(`(g) ${settings.BENCH_LEASES} releases of fresh pending leases through the HTTP API, after ${settings.BENCH_API_WARMUP} untimed`);
  const warmUpIds = await createLeases(idle, blueprintId, settings.BENCH_API_WARMUP, settings.BENCH_CLIENTS);
  const apiLeaseIds = await createLeases(idle, blueprintId, settings.BENCH_LEASES, settings.BENCH_CLIENTS);
  api = await startApiServer(database, settings.BENCH_CLIENTS);
  const apiReleases = await measureApiReleases(api, apiLeaseIds, warmUpIds, settings.BENCH_CLIENTS);

  progress(`launching ${settings.BENCH_WORKERS} Slipway worker processes`);
  fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, database.url);
  progress('(c) the cheap path: draining the backlog of releases of pending leases');
  const cheapPath = await measureDrain(database.db, fleet);
  const failedBefore = (await commandsByStatus(database.db)).failed;
  const slipwaySystem = new SlipwaySystem(database, fleet);
  const slipwayFigures = await measureSystem(slipwaySystem, settings, progress);
  progress(
    `(h) HTTP releases with ?wait at ${settings.BENCH_API_WAIT_RATE}/s for ${settings.BENCH_LATENCY_SECONDS} s (after making their leases active)`,
  );
  const apiWait = await measureApiWait(
    api,
    slipwaySystem,
    'api-wait',
    { rate: settings.BENCH_API_WAIT_RATE, seconds: settings.BENCH_LATENCY_SECONDS },
    settings.BENCH_CLIENTS,
  );
  const preemption = await measurePreemption(database.db, fleet, settings, progress);
  const explanations = await measureExplanations(database.db, fleet, api, settings, progress);
  await api.stop();
  api = undefined;
  const failedCommands = (await commandsByStatus(database.db)).failed - failedBefore;
  const peakRssBytes = await fleet.takePeakRss();
  await fleet.stop();
  fleet = undefined;

  const service = await measureService(database, settings, progress);

  progress(`(d) the peer: graphile-worker alone, ${settings.BENCH_PEER_WORKERS} tuned processes`);
  await installPeer(database.pool, database.url, log);
  const peerShape = { workers: settings.BENCH_PEER_WORKERS, concurrency: settings.BENCH_PEER_CONCURRENCY };
  const tuned = await runPeer(database, 'tuned', peerShape, log, (peer) => measureSystem(peer, settings, progress));
  const defaultsLeases = settings.BENCH_PEER_DEFAULTS_LEASES;
  const defaults =
    defaultsLeases > 0
      ? await runPeer(database, 'defaults', peerShape, log, async (peer) => {
          progress(`(d) ${peer.name}: ${defaultsLeases} releases of active leases at once (after making them active)`);
          return { activeReleases: await measureActiveReleases(peer, defaultsLeases, settings.BENCH_CLIENTS) };
        })
      : undefined;

  const figures: Figures = {
    startedAt,
    machine,
    server,
    settings,
    reproduce: reproduceCommand(settings),
    baseline,
    append,
    cheapPath,
    slipway: { ...slipwayFigures, failedCommands, peakRssBytes },
    api: { releases: apiReleases, wait: apiWait },
    service,
    preemption,
    explanations,
    peer: { tuned, defaults },
    loadAverageAtEnd: os.loadavg()[0]!,
    runSeconds: (performance.now() - runStarted) / 1000,
  };
  const file = await writeFigures(figures);
  console.log(formatReport(figures));
  console.log(`\nFigures: ${file}`);
} finally {
  fleet?.kill();
  await api?.stop();
  progress('dropping the database');
  await bench.close();
}
