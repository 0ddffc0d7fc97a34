import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { z } from 'zod';
import type { Database } from '../src/db/Database.ts';
import { createLease } from '../src/objects/createLease.ts';
import { appendCommand } from '../src/queue/appendCommand.ts';
import { BENCH_ACTOR, createSimulatedBlueprint } from './fixtures.ts';
import { MachineSchema } from './machine.ts';
import { pollUntil } from './measure.ts';
import { ServerSchema } from './server.ts';
import type { WorkerFleet } from './WorkerFleet.ts';

/**
 * Time-driven work on time (docs/benchmark.md, "Time-driven work"): how
 * late after its due time each deadline and health check takes effect, with
 * BENCH_WORKERS worker processes and no collector schedule, so what is
 * measured is the workers' timekeepers (src/worker/Timekeeper.ts).
 *
 * - Deadlines: BENCH_TIMELY_LEASES leases whose expiry times are the same
 *   instant, as many heartbeat leases that never beat (due two intervals
 *   after each activation), and as many leases queued behind a full pool
 *   whose wait deadlines of 1 s fall in that same second (a deadline set
 *   less than a poll before it passes). Lateness: the release's settlement
 *   (the lease released) minus the deadline.
 * - Checks: BENCH_TIMELY_RESOURCES active resources checked every second,
 *   their last checks spread over the second, for BENCH_TIMELY_SECONDS.
 *   Lateness: the check's settlement minus its due time (the last check
 *   plus the interval, which the collector's reason states).
 * - Replacement: a resource of a warm pool found gone by its check, and the
 *   replacement the blueprint makes: from the check's answer (the health
 *   event) to the new resource active, BENCH_TIMELY_REPLACEMENTS times.
 *
 * The bar: every deadline and check within 2 s of its due time (p99 and max).
 */
export const TimelinessSettingsSchema = z.object({
  BENCH_WORKERS: z.coerce.number().int().min(1).max(64).default(2),
  BENCH_TIMELY_LEASES: z.coerce.number().int().min(1).max(100_000).default(300),
  BENCH_TIMELY_RESOURCES: z.coerce.number().int().min(1).max(100_000).default(200),
  BENCH_TIMELY_SECONDS: z.coerce.number().int().min(2).max(3600).default(20),
  BENCH_TIMELY_REPLACEMENTS: z.coerce.number().int().min(0).max(100).default(5),
});
export type TimelinessSettings = z.infer<typeof TimelinessSettingsSchema>;

const LatenessSchema = z.object({ count: z.number(), p50Ms: z.number(), p99Ms: z.number(), maxMs: z.number() });
export type Lateness = z.infer<typeof LatenessSchema>;

export const TimelinessFiguresSchema = z.object({
  startedAt: z.string(),
  machine: MachineSchema,
  server: ServerSchema,
  settings: TimelinessSettingsSchema,
  reproduce: z.string(),
  expiry: LatenessSchema,
  heartbeat: LatenessSchema,
  waitDeadline: LatenessSchema,
  checks: LatenessSchema,
  /** From a check's "gone" answer to its replacement active. */
  replacement: LatenessSchema.optional(),
  runSeconds: z.number(),
});
export type TimelinessFigures = z.infer<typeof TimelinessFiguresSchema>;

/** The bar: each deadline and check takes effect within this long of its due time. */
export const TIMELY_WITHIN_MS = 2000;

function lateness(samples: readonly number[]): Lateness {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? Number.NaN;
  return { count: sorted.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: sorted.at(-1) ?? Number.NaN };
}

/** Deadlines: leases due in the same second, released by the timekeepers; their lateness by kind of deadline. */
export async function measureDeadlines(database: Database, settings: TimelinessSettings, progress: (step: string) => void) {
  const { db } = database;
  const n = settings.BENCH_TIMELY_LEASES;
  const roomy = await createSimulatedBlueprint(db, 'timely-roomy', { maxResources: 10, leasesPerResource: Math.ceil((2 * n) / 10) });
  const full = await createSimulatedBlueprint(db, 'timely-full', { maxResources: 1, leasesPerResource: 1 });
  const name = async (id: number) => (await db.selectFrom('blueprints').select('name').where('id', '=', id).executeTakeFirstOrThrow()).name;
  const [roomyName, fullName] = [await name(roomy), await name(full)];
  const blocker = await createLease(db, { blueprint: fullName, holder: 'blocker' }, BENCH_ACTOR);
  await pollUntil('the blocker active', async () => (await leaseStates(database, [blocker.lease.id])).every((s) => s === 'active'), 60_000);

  // Time to create them all first; the due instant a whole second.
  const dueAt = new Date(Math.ceil((Date.now() + 5000 + n * 20) / 1000) * 1000);
  progress(`deadlines: ${n} expiring at ${dueAt.toISOString()}, ${n} heartbeat leases that never beat, ${n} wait deadlines in that second`);
  const ids: number[] = [];
  const create = async (request: Parameters<typeof createLease>[1]) => ids.push((await createLease(db, request, BENCH_ACTOR)).lease.id);
  for (let i = 0; i < n; i += 16) {
    await Promise.all(
      Array.from({ length: Math.min(16, n - i) }, (_, j) => [
        create({ blueprint: roomyName, holder: `x${i + j}`, expiresAt: dueAt.toISOString() }),
        create({ blueprint: roomyName, holder: `h${i + j}`, heartbeatMs: 1000 }),
      ]).flat(),
    );
  }
  // The wait deadlines: created a second before the instant, each 1 s long.
  await sleep(Math.max(0, dueAt.getTime() - 1000 - Date.now()));
  await Promise.all(Array.from({ length: n }, (_, i) => create({ blueprint: fullName, holder: `w${i}`, waitTimeoutMs: 1000 })));
  await pollUntil('every lease released', async () => (await leaseStates(database, ids)).every((s) => s === 'destroyed'), 10 * 60_000, 200);
  const { rows } = await sql<{ kind: 'expiry' | 'heartbeat' | 'wait'; late_ms: number }>`
    select case when l.expires_at is not null then 'expiry' when l.heartbeat_deadline is not null then 'heartbeat' else 'wait' end as kind,
           extract(epoch from c.finished_at - coalesce(l.expires_at, l.heartbeat_deadline, l.wait_deadline))::float8 * 1000 as late_ms
    from leases l join commands c on c.target_kind = 'lease' and c.target_id = l.id and c.kind = 'release' and c.status = 'done'
    where l.id = any(${ids}::bigint[]) and c.source = 'gc'
  `.execute(db);
  if (rows.length !== ids.length) throw new Error(`${ids.length} leases, but ${rows.length} released for a deadline`);
  const of = (kind: string) => lateness(rows.filter((r) => r.kind === kind).map((r) => r.late_ms));
  return { expiry: of('expiry'), heartbeat: of('heartbeat'), waitDeadline: of('wait') };
}

async function leaseStates(database: Database, ids: readonly number[]): Promise<string[]> {
  const rows = await database.db
    .selectFrom('leases')
    .select('state')
    .where('id', 'in', [...ids])
    .execute();
  return rows.map((r) => r.state);
}

/**
 * Checks every second: resources made active in the database directly (setup,
 * as bench:checks does), their last checks spread over one interval, then
 * every settled check by the timekeepers sampled for BENCH_TIMELY_SECONDS
 * (each stays at least an interval, until the next check of its resource
 * replaces it).
 */
export async function measureChecks(database: Database, settings: TimelinessSettings, progress: (step: string) => void): Promise<Lateness> {
  const { db } = database;
  const count = settings.BENCH_TIMELY_RESOURCES;
  const blueprintId = await createSimulatedBlueprint(db, 'timely-checked', { maxResources: count, leasesPerResource: 1 });
  await sql`
    insert into resources (blueprint_id, state, capacity, idle_since, checked_at, health)
    select ${blueprintId}::bigint, 'active', 1, now(), now() - random() * interval '1 second', 'healthy' from generate_series(1, ${count}::int)
  `.execute(db);
  await db.updateTable('blueprints').set({ live_resources: count, check_interval_ms: 1000 }).where('id', '=', blueprintId).execute();
  progress(`checks: ${count} resources checked every second, for ${settings.BENCH_TIMELY_SECONDS} s`);
  const seen = new Map<number, number>();
  const until = Date.now() + settings.BENCH_TIMELY_SECONDS * 1000;
  while (Date.now() < until) {
    const { rows } = await sql<{ id: number; late_ms: number }>`
      select c.id, extract(epoch from c.finished_at - (substring(c.reason from '^last checked ([^;]+);')::timestamptz + interval '1 second'))::float8 * 1000 as late_ms
      from commands c join resources r on r.id = c.target_id
      where c.target_kind = 'resource' and c.kind = 'check' and c.status = 'done' and c.source = 'gc'
        and r.blueprint_id = ${blueprintId} and c.reason like 'last checked %'
    `.execute(db);
    for (const row of rows) seen.set(row.id, row.late_ms);
    await sleep(200);
  }
  return lateness([...seen.values()]);
}

/** A warm pool checked every second: a resource made gone, and the time from the check's answer to its replacement active. */
export async function measureReplacement(database: Database, settings: TimelinessSettings, progress: (step: string) => void): Promise<Lateness> {
  const { db } = database;
  const size = 3;
  const blueprintId = await createSimulatedBlueprint(db, 'timely-warm', { maxResources: size, leasesPerResource: 1, minResources: size });
  await db.updateTable('blueprints').set({ check_interval_ms: 1000 }).where('id', '=', blueprintId).execute();
  const active = async () =>
    (await db.selectFrom('resources').select('id').where('blueprint_id', '=', blueprintId).where('state', '=', 'active').execute()).map((r) => r.id);
  await appendCommand(db, { target: { kind: 'blueprint', id: blueprintId }, kind: 'top_up', actor: BENCH_ACTOR });
  await pollUntil('the warm pool', async () => (await active()).length === size, 60_000);
  progress(`replacement: ${settings.BENCH_TIMELY_REPLACEMENTS} resources found gone, one after another`);
  const samples: number[] = [];
  for (let i = 0; i < settings.BENCH_TIMELY_REPLACEMENTS; i++) {
    const [doomed] = await active();
    await appendCommand(db, {
      target: { kind: 'blueprint', id: blueprintId },
      kind: 'update_settings',
      payload: { settings: { latencyMs: { min: 0, max: 0 }, recordEffects: false, checks: { gone: [doomed!] } } },
      actor: BENCH_ACTOR,
    });
    await pollUntil(
      'the replacement',
      async () => {
        const now = await active();
        return now.length === size && !now.includes(doomed!);
      },
      60_000,
    );
    const { rows } = await sql<{ ms: number }>`
      select extract(epoch from
        (select min(e.created_at) from events e join resources r on r.id = e.target_id
          where e.target_kind = 'resource' and r.blueprint_id = ${blueprintId} and r.id > ${doomed!} and e.type = 'state' and e.to_state = 'active')
        - (select max(e.created_at) from events e where e.target_kind = 'resource' and e.target_id = ${doomed!} and e.type = 'health'))::float8 * 1000 as ms
    `.execute(db);
    samples.push(rows[0]!.ms);
  }
  return lateness(samples);
}

/** All three, on a running fleet. */
export async function measureTimeliness(database: Database, fleet: WorkerFleet, settings: TimelinessSettings, progress: (step: string) => void) {
  const deadlines = await fleet.whileRunning(measureDeadlines(database, settings, progress));
  const checks = await fleet.whileRunning(measureChecks(database, settings, progress));
  const replacement = settings.BENCH_TIMELY_REPLACEMENTS > 0 ? await fleet.whileRunning(measureReplacement(database, settings, progress)) : undefined;
  return { ...deadlines, checks, ...(replacement ? { replacement } : {}) };
}

/** Writes the figures to .slipway/bench/timeliness-<start time>.json; returns the path. */
export async function writeTimelinessFigures(figures: TimelinessFigures): Promise<string> {
  const dir = path.resolve('.slipway', 'bench');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${TIMELINESS_PREFIX}${figures.startedAt.replaceAll(':', '-')}.json`);
  await writeFile(file, `${JSON.stringify(figures, null, 2)}\n`);
  return file;
}

export const TIMELINESS_PREFIX = 'timeliness-';

/** Reads a timeliness figures file back, checked against the schema. */
export async function readTimelinessFigures(file: string): Promise<TimelinessFigures> {
  const parsed = TimelinessFiguresSchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
  if (!parsed.success) throw new Error(`${file} is not a timeliness figures file: ${parsed.error.issues.map((i) => i.path.join('.')).join(', ')}`);
  return parsed.data;
}

/** The report's lines, and the bar. */
export function formatTimeliness(figures: TimelinessFigures): string {
  const line = (label: string, l: Lateness) =>
    `  ${label.padEnd(44)} ${String(l.count).padStart(6)}   p50 ${ms(l.p50Ms)}   p99 ${ms(l.p99Ms)}   max ${ms(l.maxMs)}`;
  return [
    `Time-driven work, ${figures.settings.BENCH_WORKERS} worker processes, no collector schedule (${os.cpus().length} cores; ${figures.server.version})`,
    line('lease expiry, all in one second', figures.expiry),
    line('heartbeat deadline (never beaten)', figures.heartbeat),
    line('wait deadline of 1 s, all in one second', figures.waitDeadline),
    line('health check every 1 s', figures.checks),
    ...(figures.replacement ? [line('gone → replacement active', figures.replacement)] : []),
    ...timelinessBars(figures).map((bar) => `  ${bar.met ? 'PASS' : 'FAIL'}  ${bar.asks}: ${bar.measured}`),
  ].join('\n');
}

const ms = (value: number) => `${Math.round(value)} ms`.padStart(8);

/** The bar, per kind of due time: its p99 and its worst within TIMELY_WITHIN_MS. */
export function timelinessBars(figures: TimelinessFigures): Array<{ asks: string; measured: string; met: boolean }> {
  const kinds: Array<[string, Lateness]> = [
    ['lease expiry', figures.expiry],
    ['heartbeat deadline', figures.heartbeat],
    ['wait deadline', figures.waitDeadline],
    ['health check', figures.checks],
  ];
  return kinds.map(([what, l]) => ({
    asks: `${what} takes effect within ${TIMELY_WITHIN_MS / 1000} s of its due time`,
    measured: `p50 ${Math.round(l.p50Ms)} ms, p99 ${Math.round(l.p99Ms)} ms, max ${Math.round(l.maxMs)} ms (${l.count})`,
    met: l.maxMs <= TIMELY_WITHIN_MS,
  }));
}
