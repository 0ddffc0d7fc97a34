import type pg from 'pg';
import type { z } from 'zod';
import { percentiles, PercentilesSchema, runClients, throughput, ThroughputSchema, timed } from './measure.ts';

/** The rate, and the per-transaction latency at that concurrency: the yardstick for the latency figures. */
export const BaselineSchema = ThroughputSchema.extend(PercentilesSchema.shape);
export type Baseline = z.infer<typeof BaselineSchema>;

/** Inserts before the timed ones: the connections opened, the client's and the server's code paths warm. */
const WARM_UP = 2_000;

/**
 * (a) The ceiling every other figure is compared with: the rate at which this
 * server commits durable one-row transactions from `clients` connections.
 * Each insert is its own autocommit transaction on the same pool and server
 * settings (synchronous_commit, fsync) as the appends, so the only difference
 * from (b) is the work Slipway does per command. WARM_UP inserts go first,
 * untimed, as the figures it is compared with run on code already warm
 * (the API's (g) after its own warm-up, the drain after the setup's).
 */
export async function measureBaseline(pool: pg.Pool, clients: number, transactions: number): Promise<Baseline> {
  await pool.query('create table bench_baseline (id bigint generated always as identity primary key, n int not null)');
  try {
    await runClients(clients, WARM_UP, (n) => pool.query('insert into bench_baseline (n) values ($1)', [n]));
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
