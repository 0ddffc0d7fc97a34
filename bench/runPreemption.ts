import { createLogger } from '../src/log.ts';
import { preemptionBar, verdict } from './bars.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { ms, pair } from './format.ts';
import { measurePreemption } from './preemption.ts';
import { loadBenchSettings } from './settings.ts';
import { WorkerFleet } from './WorkerFleet.ts';

/**
 * `node --import tsx bench/runPreemption.ts`: (k), preemption
 * (bench/preemption.ts), alone on a fresh database, at the sizes of the
 * main run's settings (BENCH_PREEMPTION_*, BENCH_WORKERS, BENCH_CLIENTS),
 * to try it or a change to it without the whole run; smaller sizes
 * (BENCH_PREEMPTION_ACTIVE=100 BENCH_PREEMPTION_WAITING=100
 * BENCH_PREEMPTION_URGENT=10) take seconds. It prints its figures and its
 * bar and writes no figures file: the published figures of (k) come from
 * `npm run bench`, which measures it beside the others.
 */
const settings = loadBenchSettings();
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench-preemption');
const progress = (step: string) => process.stderr.write(`[preemption ${new Date().toISOString().slice(11, 19)}] ${step}\n`);

progress('opening a fresh database');
const bench = await openBenchDatabase(log, settings.BENCH_CLIENTS + 4);
let fleet: WorkerFleet | undefined;
try {
  progress(`launching ${settings.BENCH_WORKERS} Slipway worker processes`);
  fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, bench.database.url, { env: { SLIPWAY_GC_INTERVAL_MINUTES: '0' } });
  await fleet.start();
  const preemption = await measurePreemption(bench.database.db, fleet, settings, progress);
  await fleet.stop();
  fleet = undefined;
  const bar = preemptionBar(preemption);
  process.stdout.write(
    [
      `(k) ${preemption.count} urgent leases, grace ${ms(preemption.graceMs)}, p50 / p99:`,
      `  granted beyond the grace period  ${pair(preemption.beyondGrace)} (max ${ms(preemption.beyondGrace.maxMs)})`,
      `  request → victim chosen          ${pair(preemption.chosen)} (max ${ms(preemption.chosen.maxMs)})`,
      `  victim released after its end    ${pair(preemption.victimEndLate)} (max ${ms(preemption.victimEndLate.maxMs)})`,
      `  victim's release → grant         ${pair(preemption.afterVictimEnd)} (max ${ms(preemption.afterVictimEnd.maxMs)})`,
      `  ${verdict(bar.met)} ${bar.asks}: ${bar.measured}`,
      '',
    ].join('\n'),
  );
} finally {
  fleet?.kill();
  progress('dropping the database');
  await bench.close();
}
