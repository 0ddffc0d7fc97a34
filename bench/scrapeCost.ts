import { performance } from 'node:perf_hooks';
import { Kysely, PostgresDialect, type CompiledQuery, sql } from 'kysely';
import { ApiServer } from '../src/server/ApiServer.ts';
import { loadConfig } from '../src/config.ts';
import type { DB } from '../migrations/schema.ts';
import { createLogger } from '../src/log.ts';
import { readState, type ScrapeSettings, scrapeSettings, STATE_CACHE_MS } from '../src/metrics/scrape.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { BENCH_ACTOR, createSimulatedBlueprint } from './fixtures.ts';
import { createLeases } from './leases.ts';
import { percentile } from './measure.ts';
import { SlipwaySystem } from './SlipwaySystem.ts';

/**
 * What a Prometheus scrape of /metrics costs (docs/benchmark.md, "What a
 * scrape costs"): `node --import tsx bench/scrapeCost.ts`, one run at a
 * time, not part of `npm run bench`.
 *
 * A fresh database gets SCRAPE_LEASES pending leases (each with its request
 * for a slot queued at its blueprint: the unsettled backlog) and SCRAPE_HISTORY settled commands per
 * lease. No worker runs, so nothing changes while it is timed. Then, one
 * after the other:
 * - SCRAPES × GET /metrics on an API server in this process, as Prometheus
 *   would ask for it: the database gauges come from the 5 s cache, so the
 *   whole series makes one or two queries;
 * - SCRAPES × the gauges' query alone (readState), which is what a scrape
 *   adds each time the cache has expired: an uncached scrape costs both;
 * - the query's plan, EXPLAIN (ANALYZE, BUFFERS), for its server-side time
 *   and the pages it reads.
 */
const LEASES = Number(process.env.SCRAPE_LEASES ?? 5000);
const HISTORY = Number(process.env.SCRAPE_HISTORY ?? 4);
const SCRAPES = Number(process.env.SCRAPES ?? 200);

const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench-scrape');
const bench = await openBenchDatabase(log, 4);
const { database } = bench;
const config = loadConfig({ ...process.env, SLIPWAY_API_PORT: '0' });
const server = await ApiServer.start(database, config, log);
try {
  const blueprintId = await createSimulatedBlueprint(database.db, 'scrape-cost', { maxResources: 10, leasesPerResource: 10 });
  // No worker runs: every lease stays pending with its request queued.
  await createLeases(new SlipwaySystem(database), blueprintId, LEASES, 8);
  await sql`
    insert into commands (target_kind, target_id, kind, issued_by, source, status, attempts, not_before, created_at, started_at, finished_at)
    select 'lease', l.id, 'renew', ${BENCH_ACTOR.issuedBy}, 'cli', 'done', 1, now(), now(), now(), now()
      from leases l, generate_series(1, ${HISTORY})`.execute(database.db);
  await sql`analyze`.execute(database.db);
  const counts = await sql<{ leases: number; commands: number; unsettled: number }>`
    select (select count(*)::int from leases) as leases, (select count(*)::int from commands) as commands,
           (select count(*)::int from commands where status in ('queued', 'running')) as unsettled`.execute(database.db);

  const scrape = async () => {
    const answer = await fetch(`${server.url}/metrics`);
    if (answer.status !== 200) throw new Error(`GET /metrics answered ${answer.status}`);
    await answer.text();
  };
  const settings = scrapeSettings(config);
  const query = () => readState(database.db, settings);
  // Warm-up: connections, plans, the JIT.
  for (let n = 0; n < 10; n++) await Promise.all([scrape(), query()]);

  const cached = await timeEach(SCRAPES, scrape);
  const uncachedQuery = await timeEach(SCRAPES, query);
  const plan = await explainStateQuery(settings);

  const report = {
    database: counts.rows[0],
    scrapes: SCRAPES,
    cacheMs: STATE_CACHE_MS,
    'GET /metrics, cached gauges (ms)': summary(cached),
    'the gauges query alone, what a cache miss adds (ms)': summary(uncachedQuery),
    'the query on the server (EXPLAIN ANALYZE)': plan,
  };
  console.log(JSON.stringify(report, null, 2));
} finally {
  await server.stop();
  await bench.close();
}

async function timeEach(times: number, work: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let n = 0; n < times; n++) {
    const started = performance.now();
    await work();
    samples.push(performance.now() - started);
  }
  return samples;
}

function summary(samples: readonly number[]) {
  const round = (ms: number) => Math.round(ms * 100) / 100;
  return {
    mean: round(samples.reduce((a, b) => a + b, 0) / samples.length),
    p50: round(percentile(samples, 50)),
    p99: round(percentile(samples, 99)),
  };
}

/**
 * Runs the gauges' query as readState writes it, on a query builder (same
 * pool) that keeps what it ran, then has PostgreSQL EXPLAIN that statement.
 */
async function explainStateQuery(settings: ScrapeSettings) {
  let captured: CompiledQuery | undefined;
  const capturing = new Kysely<DB>({
    dialect: new PostgresDialect({ pool: database.pool }),
    log: (event) => {
      captured = event.query;
    },
  });
  await readState(capturing, settings);
  if (!captured) throw new Error('the gauges query was not captured');
  const { rows } = await database.pool.query(`explain (analyze, buffers, format json) ${captured.sql}`, [...captured.parameters]);
  const [top] = rows[0]['QUERY PLAN'] as Array<{ 'Execution Time': number; 'Planning Time': number; Plan: Record<string, number> }>;
  return {
    executionMs: top!['Execution Time'],
    planningMs: top!['Planning Time'],
    sharedBuffersHit: top!.Plan['Shared Hit Blocks'],
    sharedBuffersRead: top!.Plan['Shared Read Blocks'],
  };
}
