import type pg from 'pg';
import type { z } from 'zod';
import { percentiles, PercentilesSchema, runClients, throughput, ThroughputSchema, timed } from './measure.ts';

/** The rate, and the per-transaction latency at that concurrency: the yardstick for the latency figures. */
export const BaselineSchema = ThroughputSchema.extend(PercentilesSchema.shape);
export type Baseline = z.infer<typeof BaselineSchema>;

/**
 * (a) The ceiling every other figure is compared with: the rate at which this
 * server commits durable one-row transactions from `clients` connections.
 * Each insert is its own autocommit transaction on the same pool and server
 * settings (synchronous_commit, fsync) as the appends, so the only difference
 * from (b) is the work Slipway does per command.
 */
export async function measureBaseline(pool: pg.Pool, clients: number, transactions: number): Promise<Baseline> {
  await pool.query('create table bench_baseline (id bigint generated always as identity primary key, n int not null)');
  try {
    const latencies: number[] = [];
    const seconds = await runClients(clients, transactions, async (n) => {
      const { ms } = await timed(() => pool.query('insert into bench_baseline (n) values ($1)', [n]));
      latencies.push(ms);
    });
    return { ...throughput(transactions, seconds), ...percentiles(latencies) };
  } finally {
    await pool.query('drop table bench_baseline');
  }
}
