import type { Db } from '../src/db/Database.ts';
import { appendCommand } from '../src/queue/appendCommand.ts';
import { BENCH_ACTOR } from './fixtures.ts';
import { runClients, throughput, type Throughput } from './measure.ts';

/**
 * (b) Appends one `release` to each lease from `clients` connections, one
 * transaction per command, through the same appendCommand the API and CLI
 * use (validation, state check, dedup insert, graphile-worker wake-up).
 * No worker runs meanwhile: the leases stay pending, so every release is
 * accepted and nothing competes with the appends.
 */
export async function measureAppend(db: Db, leaseIds: readonly number[], clients: number): Promise<Throughput> {
  const seconds = await runClients(clients, leaseIds.length, async (n) => {
    const { coalesced } = await appendCommand(db, { target: { kind: 'lease', id: leaseIds[n]! }, kind: 'release', actor: BENCH_ACTOR });
    // A coalesced append writes less than a real one; counting it would flatter the figure.
    if (coalesced) throw new Error(`release of lease ${leaseIds[n]} coalesced: the leases were not fresh`);
  });
  return throughput(leaseIds.length, seconds);
}
