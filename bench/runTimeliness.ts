import { performance } from 'node:perf_hooks';
import { createLogger } from '../src/log.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { describeMachine } from './machine.ts';
import { describeServer } from './server.ts';
import { formatTimeliness, measureTimeliness, type TimelinessFigures, TimelinessSettingsSchema, writeTimelinessFigures } from './timeliness.ts';
import { WorkerFleet } from './WorkerFleet.ts';

/**
 * `node --import tsx bench/runTimeliness.ts`: the time-driven work's
 * lateness (bench/timeliness.ts) alone, on a fresh database, in about a
 * minute: it needs none of the main run's figures. Its figures go to
 * .slipway/bench/timeliness-<start>.json; `npm run bench:publish` that file,
 * then `npm run docs`, puts them in docs/benchmark.md.
 */
const runStarted = performance.now();
const startedAt = new Date().toISOString();
const settings = TimelinessSettingsSchema.parse(process.env);
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench-timeliness');
const progress = (step: string) => process.stderr.write(`[timeliness ${new Date().toISOString().slice(11, 19)}] ${step}\n`);

progress('opening a fresh database');
const bench = await openBenchDatabase(log, 20);
const { database } = bench;
let fleet: WorkerFleet | undefined;
try {
  const machine = await describeMachine(database.pool);
  const server = await describeServer(database.url, bench.embedded);
  progress(`launching ${settings.BENCH_WORKERS} Slipway worker processes (no collector schedule)`);
  fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, database.url, { env: { SLIPWAY_GC_INTERVAL_MINUTES: '0' } });
  await fleet.start();
  const measured = await measureTimeliness(database, fleet, settings, progress);
  await fleet.stop();
  fleet = undefined;
  const assignments = [
    ...(process.env.DATABASE_URL ? ['DATABASE_URL=<same server>'] : []),
    ...Object.entries(settings).map(([name, value]) => `${name}=${value}`),
  ];
  const figures: TimelinessFigures = {
    startedAt,
    machine,
    server,
    settings,
    reproduce: `${assignments.join(' ')} node --import tsx bench/runTimeliness.ts`,
    ...measured,
    runSeconds: (performance.now() - runStarted) / 1000,
  };
  const file = await writeTimelinessFigures(figures);
  console.log(formatTimeliness(figures));
  console.log(`\nFigures: ${file}`);
} finally {
  fleet?.kill();
  progress('dropping the database');
  await bench.close();
}
