import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { z } from 'zod';
import { loadConfig } from '../src/config.ts';
import { gcSettings, runCollectorPass } from '../src/gc/runCollector.ts';
import { createLogger } from '../src/log.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { allQueuesEmpty } from './commandCounts.ts';
import { createSimulatedBlueprint } from './fixtures.ts';
import { pollUntil } from './measure.ts';
import { cpuOf, postmasterPid, serverCpu } from './processCpu.ts';
import { WorkerFleet } from './WorkerFleet.ts';

/**
 * `npm run bench:checks`: what the observe loop costs (docs/operations.md,
 * resource health). BENCH_CHECK_RESOURCES active resources of one blueprint
 * that checks them every BENCH_CHECK_INTERVAL_S; one collector pass asks
 * each to check (timed), and BENCH_WORKERS worker processes drain the
 * checks (timed, with their CPU and PostgreSQL's from /proc). Then two
 * passes more, as the next intervals would ask, so the figure includes the
 * collector forgetting the earlier unchanged checks.
 *
 * The resources are made in the database directly, active and idle: that is
 * setup, not the path measured (made through their lifecycle, 10,000 would
 * take minutes), and a check reads nothing else of them. The driver is the
 * simulated one at zero latency, so the figures are Slipway's own work.
 *
 * Printed: per pass, the collector's time and the drain's rate; the CPU per
 * check; and the share of the fleet's capacity the checks take at the
 * interval: (resources / interval) / (checks settled per second).
 */
const Settings = z.object({
  BENCH_CHECK_RESOURCES: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  BENCH_CHECK_INTERVAL_S: z.coerce.number().int().min(1).max(86_400).default(300),
  BENCH_WORKERS: z.coerce.number().int().min(1).max(64).default(2),
});
const settings = Settings.parse(process.env);
const resources = settings.BENCH_CHECK_RESOURCES;
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench-checks');
const progress = (step: string) => process.stderr.write(`[checks ${new Date().toISOString().slice(11, 19)}] ${step}\n`);
const PASSES = 3;
const TIMEOUT_MS = 30 * 60_000;

progress('opening a fresh database');
const bench = await openBenchDatabase(log, 8);
const { database } = bench;
let fleet: WorkerFleet | undefined;
try {
  const blueprintId = await createSimulatedBlueprint(database.db, 'checked', { maxResources: resources, leasesPerResource: 1 });
  await database.db
    .updateTable('blueprints')
    .set({ check_interval_ms: settings.BENCH_CHECK_INTERVAL_S * 1000, live_resources: resources })
    .where('id', '=', blueprintId)
    .execute();
  progress(`making ${resources} active resources`);
  await sql`
    insert into resources (blueprint_id, state, capacity, idle_since)
    select ${blueprintId}::bigint, 'active', 1, now() from generate_series(1, ${resources}::int)
  `.execute(database.db);
  await sql`analyze`.execute(database.db);

  progress(`launching ${settings.BENCH_WORKERS} Slipway worker processes`);
  // The passes are this run's own: the workers' scheduled collector stays off.
  fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, database.url, { env: { SLIPWAY_GC_INTERVAL_MINUTES: '0' } });
  await fleet.start();
  const postmaster = await postmasterPid(database.db);
  // The collector's defaults (src/config.ts): a pass asks every resource due, a batch at a time, within its budget.
  const gc = gcSettings(loadConfig({}));

  const lines: string[] = [];
  let slowestShare = 0;
  for (let pass = 1; pass <= PASSES; pass++) {
    // As if the interval had gone by since the last pass's checks.
    await database.db.updateTable('resources').set({ checked_at: null }).where('blueprint_id', '=', blueprintId).execute();
    progress(`pass ${pass}: the collector asks ${resources} resources to check`);
    const cpuBefore = { workers: (await cpuOf(fleet.pids)).seconds, server: await serverCpu(postmaster) };
    const started = performance.now();
    const report = await runCollectorPass(database, gc, 'cli', log);
    if (report.steps.checkResources?.found !== resources)
      throw new Error(`pass ${pass} found ${report.steps.checkResources?.found} resources due, not ${resources}`);
    const passSeconds = (performance.now() - started) / 1000;
    await fleet.whileRunning(pollUntil('the checks to settle', () => allQueuesEmpty(database.db), TIMEOUT_MS, 100));
    const totalSeconds = (performance.now() - started) / 1000;
    const cpu = { workers: (await cpuOf(fleet.pids)).seconds - cpuBefore.workers, server: (await serverCpu(postmaster)) - cpuBefore.server };
    const rate = resources / totalSeconds;
    const share = resources / settings.BENCH_CHECK_INTERVAL_S / rate;
    slowestShare = Math.max(slowestShare, share);
    lines.push(
      `  pass ${pass}: ${resources} checks asked in ${passSeconds.toFixed(1)} s, all settled after ${totalSeconds.toFixed(1)} s (${Math.round(rate)}/s); ` +
        `CPU per check: workers ${((cpu.workers / resources) * 1000).toFixed(2)} ms, PostgreSQL ${((cpu.server / resources) * 1000).toFixed(2)} ms; ` +
        `${(share * 100).toFixed(1)} % of the fleet's time at one check per ${settings.BENCH_CHECK_INTERVAL_S} s`,
    );
  }
  const { n: rows } = await database.db
    .selectFrom('commands')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('kind', '=', 'check')
    .executeTakeFirstOrThrow();
  const { n: health } = await database.db
    .selectFrom('events')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('type', '=', 'health')
    .executeTakeFirstOrThrow();
  process.stdout.write(
    [
      `Check passes over ${resources} healthy resources, ${settings.BENCH_WORKERS} worker processes, simulated driver at zero latency`,
      ...lines,
      `  rows left: ${rows} check commands, ${health} health events (the first answer of each resource; later unchanged checks are forgotten but the latest)`,
      `  at most ${(slowestShare * 100).toFixed(1)} % of the fleet's capacity goes to checks at one per resource every ${settings.BENCH_CHECK_INTERVAL_S} s`,
      '',
    ].join('\n'),
  );
} finally {
  await fleet?.stop();
  await bench.close();
}
