import type pg from 'pg';
import { percentile, runClients, throughput, timed, type Throughput } from './measure.ts';

export interface BaselineResult extends Throughput {
  /** Per-transaction latency at that concurrency, the yardstick for (e). */
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/**
 * (a) The ceiling every other figure is compared with: the rate at which this
 * server commits durable one-row transactions from `clients` connections.
 * Each insert is its own autocommit transaction on the same pool and server
 * settings (synchronous_commit, fsync) as the appends, so the only difference
 * from (b) is the work Slipway does per command.
 */
export async function measureBaseline(pool: pg.Pool, clients: number, transactions: number): Promise<BaselineResult> {
  await pool.query('create table bench_baseline (id bigint generated always as identity primary key, n int not null)');
  try {
    const latencies: number[] = [];
    const seconds = await runClients(clients, transactions, async (n) => {
      const { ms } = await timed(() => pool.query('insert into bench_baseline (n) values ($1)', [n]));
      latencies.push(ms);
    });
    return { ...throughput(transactions, seconds), p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
  } finally {
    await pool.query('drop table bench_baseline');
  }
}
