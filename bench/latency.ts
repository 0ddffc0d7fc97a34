import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import type { Database, Db } from '../src/db/Database.ts';
import { COMMANDS_CHANNEL } from '../src/drain/commitOutcome.ts';
import { appendCommand } from '../src/queue/appendCommand.ts';
import { BENCH_ACTOR, createActiveLeases } from './fixtures.ts';
import { percentile, pollUntil } from './measure.ts';
import type { WorkerFleet } from './WorkerFleet.ts';

export interface LatencyResult {
  readonly commands: number;
  readonly targetRate: number;
  /** The rate the generator actually kept (it catches up when late, never skips). */
  readonly achievedRate: number;
  /** Releases per second from the first append until the last one settled: below the target, the workers fell behind. */
  readonly settledRate: number;
  /** Client-side, from each append's scheduled time to the NOTIFY that it settled. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Database-side, finished_at − created_at (both transaction start times). */
  readonly dbP50Ms: number;
  readonly dbP99Ms: number;
}

/** A backlog the workers cannot clear in this long fails the run instead of hanging it. */
const SETTLE_TIMEOUT_MS = 5 * 60_000;

/**
 * (e) Append-to-done latency under a steady load: with the fleet running,
 * releases active leases open-loop at `rate` per second for `seconds`. Each
 * append is sent at its scheduled time whether or not earlier ones are done,
 * and its latency counts from that scheduled time, so a slow engine (or a late
 * generator) shows up as latency instead of silently lowering the rate.
 * Active leases (not pending ones) so each release takes the realistic path:
 * a driver call, then destroy, then a release_slot message to its resource.
 */
export async function measureLatency(
  database: Database,
  fleet: WorkerFleet,
  load: { rate: number; seconds: number },
  clients: number,
): Promise<LatencyResult> {
  const total = load.rate * load.seconds;
  const leaseIds = await fleet.whileRunning(createActiveLeases(database.db, 'bench-latency', total, clients));
  const listener = await SettleListener.open(database.url);
  try {
    const release = async (n: number) => {
      const { command } = await appendCommand(database.db, { target: { kind: 'lease', id: leaseIds[n]! }, kind: 'release', actor: BENCH_ACTOR });
      return command.id;
    };
    const sent = await openLoop(total, load.rate, release);
    const commandIds = await Promise.all(sent.results);
    const allSettled = async () => commandIds.every((id) => listener.settledAt.has(id));
    await fleet.whileRunning(pollUntil('every timed release to settle', allSettled, SETTLE_TIMEOUT_MS));

    const settledAt = commandIds.map((id) => listener.settledAt.get(id)!);
    const clientMs = settledAt.map((at, n) => at - sent.dueAt[n]!);
    const databaseMs = await databaseLatencies(database.db, commandIds);
    return {
      commands: total,
      targetRate: load.rate,
      achievedRate: (total - 1) / sent.seconds,
      settledRate: total / ((Math.max(...settledAt) - sent.dueAt[0]!) / 1000),
      p50Ms: percentile(clientMs, 50),
      p99Ms: percentile(clientMs, 99),
      dbP50Ms: percentile(databaseMs, 50),
      dbP99Ms: percentile(databaseMs, 99),
    };
  } finally {
    await listener.close();
  }
}

/**
 * Starts `send(n)` at n / rate seconds from now, for n below `total`, never
 * waiting for earlier sends to finish (open loop); a late timer is caught up
 * at once, never skipped. Returns each send's scheduled time, its pending
 * result, and how long the sending took.
 */
async function openLoop<T>(
  total: number,
  rate: number,
  send: (n: number) => Promise<T>,
): Promise<{ dueAt: number[]; results: Promise<T>[]; seconds: number }> {
  const started = performance.now();
  const dueAt: number[] = [];
  const results: Promise<T>[] = [];
  for (let n = 0; n < total; n++) {
    dueAt[n] = started + (n * 1000) / rate;
    const wait = dueAt[n]! - performance.now();
    if (wait > 0) await sleep(wait);
    const result = send(n);
    // The caller awaits every result; this only keeps Node from calling a
    // failure unhandled while the loop is still sending.
    result.catch(() => undefined);
    results.push(result);
  }
  return { dueAt, results, seconds: (performance.now() - started) / 1000 };
}

async function databaseLatencies(db: Db, commandIds: readonly number[]): Promise<number[]> {
  const rows = await db
    .selectFrom('commands')
    .select(sql<number>`extract(epoch from finished_at - created_at) * 1000`.as('ms'))
    .where('id', 'in', [...commandIds])
    .execute();
  return rows.map((row) => Number(row.ms));
}

/** When each command settled, as announced on the drain's notification channel. */
class SettleListener {
  readonly settledAt = new Map<number, number>();

  private constructor(private readonly client: pg.Client) {}

  static async open(url: string): Promise<SettleListener> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const listener = new SettleListener(client);
    client.on('notification', ({ payload }) => {
      const { id, status } = JSON.parse(payload ?? '{}') as { id: number; status: string };
      // 'queued' announces a yield (the command will run again later), not an end.
      if (status !== 'queued' && !listener.settledAt.has(id)) listener.settledAt.set(id, performance.now());
    });
    await client.query(`listen ${COMMANDS_CHANNEL}`);
    return listener;
  }

  close(): Promise<void> {
    return this.client.end();
  }
}
