import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { z } from 'zod';
import type { Database, Db } from '../src/db/Database.ts';
import { EmbeddedDatabase } from '../src/db/EmbeddedDatabase.ts';
import { createLogger } from '../src/log.ts';
import { openBenchDatabase } from './benchDatabase.ts';
import { createActiveLeases } from './leases.ts';
import { pollUntil, runClients } from './measure.ts';
import { cpuOf, postmasterPid, serverCpu } from './processCpu.ts';
import { measureActiveReleases } from './activeReleases.ts';
import { loadBenchSettings } from './settings.ts';
import { SlipwaySystem } from './SlipwaySystem.ts';
import { WorkerFleet } from './WorkerFleet.ts';

/**
 * `npm run bench:profile`: where the CPU of a release of an active lease
 * goes, the figure (c) of `npm run bench` measured once more with its
 * instruments on (so it runs slower than in the benchmark, and prints no
 * rate). It releases BENCH_LIFECYCLE_LEASES active leases from
 * BENCH_CLIENTS connections, drained by BENCH_WORKERS worker processes, and
 * prints per release:
 *   - CPU seconds of PostgreSQL's processes, of the workers (and the part of
 *     theirs in the kernel) and of this process (the clients appending the
 *     releases and polling for the end), from /proc;
 *   - the same CPU for the two parts of a release measured apart, on as
 *     many other leases: every release appended with no worker running,
 *     then the backlog drained by fresh workers (each part's own cost,
 *     without the other competing for the cores);
 *   - the commands each release caused, by object kind and command;
 *   - the WAL records it wrote, by table and index and by kind of record
 *     (pg_walinspect): the row versions, index entries and row locks a
 *     release costs, which, unlike CPU, do not vary with the machine;
 *   - the statements that took the most server time, from pg_stat_statements;
 *   - where the workers' time went while they were not idle, by package and
 *     by function (self time), from V8 CPU profiles (node --cpu-prof). These
 *     sample a thread whenever it is not idle, so a system call it waited in
 *     for a core (a write that woke a PostgreSQL process, which then ran)
 *     counts in full: the kernel's share of their CPU is the /proc figure.
 * It needs its own embedded cluster, under .slipway/profile, with
 * pg_stat_statements preloaded (set up on the first run); DATABASE_URL is
 * not used. Linux only (/proc).
 */
const HOME = path.resolve('.slipway', 'profile');
const PROFILE_DIR = path.join(HOME, 'cpu');
const TOP = 15;

const settings = loadBenchSettings();
const count = settings.BENCH_LIFECYCLE_LEASES;
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench-profile');
const progress = (step: string) => process.stderr.write(`[profile ${new Date().toISOString().slice(11, 19)}] ${step}\n`);

/** Starts the profile cluster once with pg_stat_statements in shared_preload_libraries (a restart applies it). */
async function preloadStatementStatistics(): Promise<void> {
  const server = await EmbeddedDatabase.open(HOME, log, 'postgres');
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  let loaded: boolean;
  try {
    const { rows } = await admin.query<{ shared_preload_libraries: string }>('show shared_preload_libraries');
    loaded = rows[0]!.shared_preload_libraries.includes('pg_stat_statements');
    if (!loaded) await admin.query("alter system set shared_preload_libraries = 'pg_stat_statements'");
  } finally {
    await admin.end();
  }
  if (!loaded && !server.owned) throw new Error(`stop the embedded server under ${HOME}, so that a restart loads pg_stat_statements`);
  // Stopped either way: openBenchDatabase starts it again (with the library).
  await server.stop();
}

async function nextCommandId(db: Db): Promise<number> {
  const { rows } = await sql<{ id: number }>`select coalesce(max(id), 0) + 1 as id from commands`.execute(db);
  return Number(rows[0]!.id);
}

async function topStatements(db: Db) {
  const { rows } = await sql<{ query: string; calls: number; total_ms: number }>`
    select query, calls::float8 as calls, total_exec_time as total_ms
    from pg_stat_statements join pg_database d on d.oid = dbid
    where d.datname = current_database()
    order by total_exec_time desc
    limit ${TOP}
  `.execute(db);
  return rows;
}

async function commandsSince(db: Db, firstId: number) {
  return db
    .selectFrom('commands')
    .select(['target_kind', 'kind', 'status', sql<number>`count(*)::int`.as('n')])
    .where('id', '>=', firstId)
    .groupBy(['target_kind', 'kind', 'status'])
    .orderBy('n', 'desc')
    .execute();
}

/** A V8 CPU profile, as much of it as is read here; times in microseconds of the system's monotonic clock. */
const CpuProfileSchema = z.object({
  nodes: z.array(z.object({ id: z.number(), callFrame: z.object({ functionName: z.string(), url: z.string(), lineNumber: z.number() }) })),
  startTime: z.number(),
  samples: z.array(z.number()),
  timeDeltas: z.array(z.number()),
});

/** Shares of the workers' busy samples (idle left out) taken within the window, all profiles together. */
interface CpuShares {
  readonly functions: { name: string; share: number }[];
  readonly areas: { name: string; share: number }[];
}

async function busyShares(windowUs: readonly [number, number]): Promise<CpuShares> {
  const byFunction = new Map<string, number>();
  const byArea = new Map<string, number>();
  let busy = 0;
  for (const file of await readdir(PROFILE_DIR)) {
    const profile = CpuProfileSchema.parse(JSON.parse(await readFile(path.join(PROFILE_DIR, file), 'utf8')));
    const frameOf = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
    let at = profile.startTime;
    profile.samples.forEach((id, i) => {
      at += profile.timeDeltas[i]!;
      const frame = frameOf.get(id)!;
      if (at < windowUs[0] || at > windowUs[1] || frame.functionName === '(idle)') return;
      const name = describeFrame(frame);
      const area = areaOf(frame);
      byFunction.set(name, (byFunction.get(name) ?? 0) + 1);
      byArea.set(area, (byArea.get(area) ?? 0) + 1);
      busy++;
    });
  }
  const top = (counts: Map<string, number>) =>
    [...counts]
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(([name, n]) => ({ name, share: (100 * n) / busy }));
  return { functions: top(byFunction), areas: top(byArea) };
}

/** The package or source folder a frame's code is in: node_modules/<package>, src/<folder>, node: internals, or V8's own. */
function areaOf(frame: { functionName: string; url: string }): string {
  if (!frame.url) return frame.functionName.startsWith('(') ? frame.functionName : 'native';
  if (frame.url.startsWith('node:')) return 'node internals';
  const inPackage = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(frame.url);
  if (inPackage) return inPackage[1]!;
  const inSource = /\/(src\/[^/]+|bench)\//.exec(frame.url);
  return inSource ? inSource[1]! : frame.url;
}

/** Per relation, the WAL records written between two positions, and how many of each kind (a record naming several blocks of one relation counts once). */
async function walRecordsByRelation(db: Db, from: string, to: string) {
  const { rows } = await sql<{ relation: string; records: number; all_records: number; kinds: unknown }>`
    with records as (
      select coalesce(pg_filenode_relation(b.reltablespace, b.relfilenode)::text, 'filenode ' || b.relfilenode) as relation,
             b.record_type, count(distinct b.start_lsn)::float8 as n
      from pg_get_wal_block_info(${from}::pg_lsn, ${to}::pg_lsn) as b
      group by 1, 2
    )
    select relation, sum(n) as records, sum(sum(n)) over () as all_records, jsonb_object_agg(record_type, n) as kinds
    from records group by relation order by records desc limit ${TOP}
  `.execute(db);
  return {
    all: rows[0]?.all_records ?? 0,
    top: rows.map((r) => ({ relation: r.relation, records: r.records, kinds: z.record(z.string(), z.number()).parse(r.kinds) })),
  };
}

/** What the profile subtracts: CPU seconds of the server, the workers and this process; the database's commits and the server's WAL bytes; when (µs, monotonic). */
interface Readings {
  readonly server: number;
  readonly workers: number;
  readonly workersKernel: number;
  readonly self: number;
  readonly commits: number;
  readonly walBytes: number;
  /** The WAL's insert position (text; subtracted only by walRecordsByRelation). */
  readonly walAt: string;
  readonly atUs: number;
}

async function takeReadings(db: Db, postmaster: number, workerPids: readonly number[]): Promise<Readings> {
  // This backend's view of the statistics is a snapshot: clear it to read them fresh.
  await sql`select pg_stat_clear_snapshot()`.execute(db);
  const { rows } = await sql<{ commits: string; wal_bytes: string; wal_at: string }>`
    select (select xact_commit from pg_stat_database where datname = current_database()) as commits,
           (select wal_bytes from pg_stat_wal) as wal_bytes, pg_current_wal_insert_lsn()::text as wal_at
  `.execute(db);
  const self = process.cpuUsage();
  const workers = await cpuOf(workerPids);
  return {
    server: await serverCpu(postmaster),
    workers: workers.seconds,
    workersKernel: workers.kernelSeconds,
    self: (self.user + self.system) / 1e6,
    commits: Number(rows[0]!.commits),
    walBytes: Number(rows[0]!.wal_bytes),
    walAt: rows[0]!.wal_at,
    atUs: monotonicUs(),
  };
}

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

function describeFrame(frame: { functionName: string; url: string; lineNumber: number }): string {
  const file = frame.url.replace(/^file:\/\//, '').replace(`${process.cwd()}/`, '');
  const where = file ? ` ${file.replace(/^.*node_modules\//, '')}:${frame.lineNumber + 1}` : '';
  return `${frame.functionName || '(anonymous)'}${where}`;
}

/** CPU seconds of the server, the workers and this process between two readings. */
type Cpu = { readonly server: number; readonly workers: number; readonly self: number };
const cpuBetween = (a: Readings, b: Readings): Cpu => ({ server: b.server - a.server, workers: b.workers - a.workers, self: b.self - a.self });

/**
 * A release's two parts apart: `count` more leases made active, the workers
 * stopped, one release appended for each from the clients (the callers'
 * part: PostgreSQL's and the clients' CPU), then fresh workers started on
 * the backlog until it is drained (the drain's part).
 */
async function measureApart(database: Database, postmaster: number): Promise<{ append: Cpu; drain: Cpu }> {
  const db = database.db;
  let fleet: WorkerFleet | undefined = await WorkerFleet.launch(settings.BENCH_WORKERS, database.url);
  try {
    await fleet.start();
    const { poolId, leaseIds } = await createActiveLeases(new SlipwaySystem(database, fleet), 'apart', count, settings.BENCH_CLIENTS);
    await fleet.stop();
    fleet = undefined;
    const callers = new SlipwaySystem(database);
    const appendFrom = await takeReadings(db, postmaster, []);
    await runClients(settings.BENCH_CLIENTS, count, (n) => callers.release(leaseIds[n]!));
    const appended = await takeReadings(db, postmaster, []);
    fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, database.url);
    await fleet.start();
    const drainers = fleet;
    const drainFrom = await takeReadings(db, postmaster, drainers.pids);
    const system = new SlipwaySystem(database, drainers);
    const drained = async () => (await system.countIn(poolId, 'destroyed')) === count && (await system.quiet());
    await drainers.whileRunning(pollUntil(`${count} releases appended beforehand to be drained`, drained, 30 * 60_000, 20));
    const drainTo = await takeReadings(db, postmaster, drainers.pids);
    return { append: cpuBetween(appendFrom, appended), drain: cpuBetween(drainFrom, drainTo) };
  } finally {
    await fleet?.stop();
  }
}

async function main(): Promise<void> {
  if (process.env.DATABASE_URL) throw new Error('bench/profile.ts runs on its own embedded cluster; unset DATABASE_URL');
  await preloadStatementStatistics();
  const bench = await openBenchDatabase(log, settings.BENCH_CLIENTS + 4, HOME);
  const { database } = bench;
  await rm(PROFILE_DIR, { recursive: true, force: true });
  await mkdir(PROFILE_DIR, { recursive: true });
  let fleet: WorkerFleet | undefined;
  try {
    await sql`create extension if not exists pg_stat_statements`.execute(database.db);
    await sql`create extension if not exists pg_walinspect`.execute(database.db);
    fleet = await WorkerFleet.launch(settings.BENCH_WORKERS, database.url, { cpuProfileDir: PROFILE_DIR });
    await fleet.start();
    const system = new SlipwaySystem(database, fleet);
    const running = fleet;
    let postmaster = 0;
    let firstCommand = 0;
    let before: Readings | undefined;
    progress(`making ${count} leases active, then releasing them from ${settings.BENCH_CLIENTS} clients`);
    const releases = await measureActiveReleases(system, count, settings.BENCH_CLIENTS, async () => {
      postmaster = await postmasterPid(database.db);
      firstCommand = await nextCommandId(database.db);
      await sql`select pg_stat_statements_reset()`.execute(database.db);
      before = await takeReadings(database.db, postmaster, running.pids);
    });
    const after = await takeReadings(database.db, postmaster, running.pids);
    const spent = (key: Exclude<keyof Readings, 'atUs' | 'walAt'>) => after[key] - before![key];
    const statements = await topStatements(database.db);
    const commands = await commandsSince(database.db, firstCommand);
    const writes = await walRecordsByRelation(database.db, before!.walAt, after.walAt);
    await fleet.stop();
    fleet = undefined;
    const shares = await busyShares([before!.atUs, after.atUs]);
    progress(`the same apart: ${count} more leases made active, their releases appended with no worker running, then drained`);
    const apart = await measureApart(database, postmaster);

    const perRelease = (s: number) => `${((s * 1000) / count).toFixed(2)} ms`;
    console.log(
      `${count} releases of active leases in ${releases.seconds.toFixed(1)} s, ${settings.BENCH_WORKERS} worker processes (instrumented: slower than the benchmark)\n`,
    );
    console.log('CPU per release');
    for (const [who, s] of [
      ['PostgreSQL', spent('server')],
      ['workers', spent('workers')],
      ['  of it in the kernel', spent('workersKernel')],
      ['clients (this process)', spent('self')],
    ] as const) {
      console.log(`  ${who.padEnd(24)} ${perRelease(s).padStart(10)}`);
    }
    console.log('\nCPU per release, its two parts measured apart (no CPU profiles)');
    console.log(`  ${''.padEnd(24)} ${'append'.padStart(10)} ${'drain'.padStart(10)}`);
    for (const [who, key] of [
      ['PostgreSQL', 'server'],
      ['workers', 'workers'],
      ['clients (this process)', 'self'],
    ] as const) {
      console.log(`  ${who.padEnd(24)} ${perRelease(apart.append[key]).padStart(10)} ${perRelease(apart.drain[key]).padStart(10)}`);
    }
    console.log(
      `\nTransactions committed per release: ${(spent('commits') / count).toFixed(2)}; WAL per release: ${(spent('walBytes') / count / 1024).toFixed(1)} KiB`,
    );
    console.log('\nCommands per release');
    for (const c of commands) console.log(`  ${(c.n / count).toFixed(2).padStart(6)}  ${c.target_kind}.${c.kind} (${c.status})`);
    console.log(
      `\nWAL records per release: ${(writes.all / count).toFixed(1)}; by table or index (pg_walinspect, top ${TOP}; kinds of record of 0.05 a release or more)`,
    );
    for (const w of writes.top) {
      const kinds = Object.entries(w.kinds)
        .filter(([, n]) => n / count >= 0.05)
        .sort((a, b) => b[1] - a[1])
        .map(([kind, n]) => `${kind} ${(n / count).toFixed(2)}`)
        .join(', ');
      console.log(`  ${(w.records / count).toFixed(2).padStart(6)}  ${w.relation.padEnd(30)} ${kinds}`);
    }
    console.log(`\nStatements by server time (pg_stat_statements, top ${TOP})`);
    console.log('  ms/release  calls/release  ms/call  statement');
    for (const s of statements) {
      const text = s.query.replace(/\s+/g, ' ').slice(0, 110);
      console.log(
        `  ${(s.total_ms / count).toFixed(3).padStart(10)}  ${(s.calls / count).toFixed(2).padStart(13)}  ${(s.total_ms / s.calls).toFixed(3).padStart(7)}  ${text}`,
      );
    }
    console.log(`\nWorkers' time when not idle, by area (V8 CPU profiles of the release window: a system call waited in counts in full)`);
    for (const a of shares.areas) console.log(`  ${a.share.toFixed(1).padStart(5)} %  ${a.name}`);
    console.log(`\nWorkers' time when not idle, by function, self time (top ${TOP})`);
    for (const f of shares.functions) console.log(`  ${f.share.toFixed(1).padStart(5)} %  ${f.name}`);
  } finally {
    fleet?.kill();
    await bench.close();
  }
}

await main();
