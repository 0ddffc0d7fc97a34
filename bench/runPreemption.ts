import { createLogger } from '../src/log.ts';
import { type ApiServer, startApiServer } from './apiBench.ts';
import { explanationBar, preemptionBar, verdict } from './bars.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { measureExplanations } from './explanations.ts';
import { integer, ms, pair } from './format.ts';
import { measurePreemption } from './preemption.ts';
import { loadBenchSettings } from './settings.ts';
import { WorkerFleet } from './WorkerFleet.ts';

/**
 * `node --import tsx bench/runPreemption.ts`: (k), preemption
 * (bench/preemption.ts), then (l), explanations at the same blueprint
 * (bench/explanations.ts), alone on a fresh database, at the sizes of the
 * main run's settings (BENCH_PREEMPTION_*, BENCH_EXPLAIN_*, BENCH_WORKERS,
 * BENCH_CLIENTS), to try them or a change to them without the whole run;
 * smaller sizes (BENCH_PREEMPTION_ACTIVE=100 BENCH_PREEMPTION_WAITING=100
 * BENCH_PREEMPTION_URGENT=10 BENCH_EXPLAIN_WAITING=200) take seconds. It
 * prints its figures and its bars and writes no figures file: the published
 * figures come from `npm run bench`, which measures them beside the others.
 */
const settings = loadBenchSettings();
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench-preemption');
const progress = (step: string) => process.stderr.write(`[preemption ${new Date().toISOString().slice(11, 19)}] ${step}\n`);

progress('opening a fresh database');
const bench = await openBenchDatabase(log, settings.BENCH_CLIENTS + 4);
let fleet: WorkerFleet | undefined;
let api: ApiServer | undefined;
try {
  progress(`launching ${settings.BENCH_WORKERS} Slipway worker processes`);
  fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, bench.database.url, { env: { SLIPWAY_GC_INTERVAL_MINUTES: '0' } });
  await fleet.start();
  api = await startApiServer(bench.database, settings.BENCH_CLIENTS);
  const preemption = await measurePreemption(bench.database.db, fleet, settings, progress);
  const explanations = await measureExplanations(bench.database.db, fleet, api, settings, progress);
  await api.stop();
  api = undefined;
  await fleet.stop();
  fleet = undefined;
  const bar = preemptionBar(preemption);
  const explained = explanationBar(explanations);
  process.stdout.write(
    [
      `(k) ${preemption.count} urgent leases, grace ${ms(preemption.graceMs)}, p50 / p99:`,
      `  granted beyond the grace period  ${pair(preemption.beyondGrace)} (max ${ms(preemption.beyondGrace.maxMs)})`,
      `  request → victim chosen          ${pair(preemption.chosen)} (max ${ms(preemption.chosen.maxMs)})`,
      `  victim released after its end    ${pair(preemption.victimEndLate)} (max ${ms(preemption.victimEndLate.maxMs)})`,
      `  victim's release → grant         ${pair(preemption.afterVictimEnd)} (max ${ms(preemption.afterVictimEnd.maxMs)})`,
      `  ${verdict(bar.met)} ${bar.asks}: ${bar.measured}`,
      `(l) ${explanations.count} explanations, ${integer(explanations.waiting)} waiting: p50 / p99 ${pair(explanations)} (max ${ms(explanations.maxMs)})`,
      `  ${verdict(explained.met)} ${explained.asks}: ${explained.measured}`,
      '',
    ].join('\n'),
  );
} finally {
  await api?.stop();
  fleet?.kill();
  progress('dropping the database');
  await bench.close();
}
