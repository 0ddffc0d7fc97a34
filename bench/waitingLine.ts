import { sql } from 'kysely';
import { z } from 'zod';
import type { Db } from '../src/db/Database.ts';
import { createLease } from '../src/objects/createLease.ts';
import { setTeam } from '../src/objects/teams.ts';
import { createLogger } from '../src/log.ts';
import { appendCommand } from '../src/queue/appendCommand.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { allQueuesEmpty } from './commandCounts.ts';
import { BENCH_ACTOR, createSimulatedBlueprint } from './fixtures.ts';
import { ms } from './format.ts';
import { openLoop, percentile, pollUntil, runClients } from './measure.ts';
import { WorkerFleet } from './WorkerFleet.ts';

/**
 * `npm run bench:line`: what serving a long waiting line costs
 * (docs/scheduling.md). For each line length of BENCH_LINE_WAITERS (1,000
 * and 10,000; the first is the baseline the others are compared with, and
 * each is longer than the releases, so the line never runs dry), a fresh
 * blueprint of HOLDERS slots, all held, and that many leases waiting, of
 * priorities 0–9 from TEAMS teams (weights 1–3, each lease its team's holder), so a decision weighs every team's
 * first waiter (docs/scheduling.md). Then BENCH_LINE_RELEASES releases of
 * active leases at BENCH_LINE_RATE a second (open loop): each frees a slot,
 * which the blueprint gives to the first lease of its line.
 *
 * Measured, from the commands' own times (the database's clock, so no
 * polling in the figure): each release's append to the grant it caused
 * settling (the lease active), through the release, the slot's return, the
 * blueprint's decision, the resource's acquire and the lease's grant. The
 * line lengths run one after the other against the same workers, so their
 * ratio is the figure to read: a decision that reads the line by its index
 * costs the same at 10,000 waiters as at 1,000.
 */
const Settings = z.object({
  BENCH_LINE_WAITERS: z
    .string()
    .default('1000,10000')
    .transform((list) => list.split(',').map(Number))
    .pipe(z.array(z.number().int().min(1).max(1_000_000)).min(1)),
  BENCH_LINE_RELEASES: z.coerce.number().int().min(10).max(100_000).default(500),
  BENCH_LINE_RATE: z.coerce.number().min(1).max(1000).default(20),
  BENCH_WORKERS: z.coerce.number().int().min(1).max(64).default(2),
});
const settings = Settings.parse(process.env);
const HOLDERS = 20;
const TEAMS = 100;
const teamOf = (i: number) => `team-${i % TEAMS}`;
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench-line');
const progress = (step: string) => process.stderr.write(`[line ${new Date().toISOString().slice(11, 19)}] ${step}\n`);
const TIMEOUT_MS = 30 * 60_000;

interface LineFigures {
  readonly waiters: number;
  readonly grants: number[];
  readonly unmatched: number;
}

progress('opening a fresh database');
const bench = await openBenchDatabase(log, 20);
const { database } = bench;
let fleet: WorkerFleet | undefined;
try {
  progress(`launching ${settings.BENCH_WORKERS} Slipway worker processes`);
  progress(`making ${TEAMS} teams`);
  for (let i = 0; i < TEAMS; i++) await setTeam(database.db, { name: teamOf(i), weight: 1 + (i % 3) }, BENCH_ACTOR);
  fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, database.url, { env: { SLIPWAY_GC_INTERVAL_MINUTES: '0' } });
  await fleet.start();
  const figures: LineFigures[] = [];
  for (const waiters of settings.BENCH_LINE_WAITERS) figures.push(await measureLine(database.db, fleet, waiters));
  const [first] = figures;
  const lines = figures.map((f) => {
    const p = (samples: number[], q: number) => ms(percentile(samples, q));
    const ratio = (q: number) => (percentile(f.grants, q) / percentile(first!.grants, q)).toFixed(2);
    const against = f === first ? '' : `; against ${first!.waiters} waiting: p50 × ${ratio(50)}, p99 × ${ratio(99)}`;
    return (
      `  ${f.waiters} waiting: slot freed → next waiter active p50 / p99 ${p(f.grants, 50)} / ${p(f.grants, 99)} (${f.grants.length} grants` +
      `${f.unmatched ? `, ${f.unmatched} releases not traced to one` : ''})${against}`
    );
  });
  process.stdout.write(
    [
      `A blueprint's waiting line of ${TEAMS} teams, ${settings.BENCH_WORKERS} worker processes, simulated driver at zero latency, ${settings.BENCH_LINE_RELEASES} releases at ${settings.BENCH_LINE_RATE}/s`,
      ...lines,
      '',
    ].join('\n'),
  );
} finally {
  await fleet?.stop();
  await bench.close();
}

async function measureLine(db: Db, workers: WorkerFleet, waiters: number): Promise<LineFigures> {
  const name = `line-${waiters}`;
  const blueprintId = await createSimulatedBlueprint(db, name, { maxResources: 2, leasesPerResource: HOLDERS / 2 });
  progress(`${name}: ${HOLDERS} holders, then ${waiters} waiting leases`);
  await runClients(8, HOLDERS, (i) => createLease(db, { blueprint: name, holder: teamOf(i), team: teamOf(i) }, BENCH_ACTOR));
  const activeCount = () =>
    db
      .selectFrom('leases')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('blueprint_id', '=', blueprintId)
      .where('state', '=', 'active')
      .executeTakeFirstOrThrow();
  await workers.whileRunning(pollUntil('the holders active', async () => (await activeCount()).n === HOLDERS, TIMEOUT_MS, 100));
  await runClients(16, waiters, (i) => createLease(db, { blueprint: name, holder: teamOf(i), team: teamOf(i), priority: i % 10 }, BENCH_ACTOR));
  const inLine = () =>
    db.selectFrom('blueprint_waiters').select(sql<number>`count(*)::int`.as('n')).where('blueprint_id', '=', blueprintId).executeTakeFirstOrThrow();
  await workers.whileRunning(pollUntil(`${waiters} leases in the line`, async () => (await inLine()).n === waiters, TIMEOUT_MS, 200));
  await sql`analyze`.execute(db);

  progress(`${name}: ${settings.BENCH_LINE_RELEASES} releases at ${settings.BENCH_LINE_RATE}/s`);
  const released = new Set<number>();
  const run = await openLoop(settings.BENCH_LINE_RELEASES, settings.BENCH_LINE_RATE, async () => {
    // An active lease not yet released: a holder, or a waiter granted since.
    // Releases run concurrently: each claims its lease before it awaits again.
    const active = await db
      .selectFrom('leases')
      .select('id')
      .where('blueprint_id', '=', blueprintId)
      .where('state', '=', 'active')
      .$if(released.size > 0, (qb) => qb.where('id', 'not in', [...released]))
      .limit(HOLDERS)
      .execute();
    const lease = active.find((l) => !released.has(l.id));
    if (!lease) return undefined;
    released.add(lease.id);
    return (await appendCommand(db, { target: { kind: 'lease', id: lease.id }, kind: 'release', actor: BENCH_ACTOR })).command.id;
  });
  const releases = run.results.filter((id): id is number => id !== undefined);
  await workers.whileRunning(
    pollUntil('the grants of the freed slots', async () => (await activeCount()).n === HOLDERS || (await inLine()).n === 0, TIMEOUT_MS, 100),
  );
  await pollUntil('the queues quiet', () => allQueuesEmpty(db), TIMEOUT_MS, 100);

  // Each release to the grant its freed slot caused, through the commands' caused_by links.
  const { rows: traced } = await sql<{ ms: number }>`
    with recursive caused as (
      select c.id, c.id as root, c.created_at as appended from commands c where c.id = any(${releases}::bigint[])
      union all
      select c.id, caused.root, caused.appended from commands c join caused on c.caused_by = caused.id
    )
    select extract(epoch from g.finished_at - caused.appended)::float8 * 1000 as ms
    from caused join commands g on g.id = caused.id
    where g.kind = 'grant' and g.status = 'done'
  `.execute(db);
  return { waiters, grants: traced.map((r) => r.ms), unmatched: releases.length - traced.length };
}
