import type { Db } from '../db/Database.ts';
import { findLease } from '../read/leases.ts';
import { readLineStanding } from '../read/lineStanding.ts';
import { readHistory } from '../read/objectHistory.ts';
import type { LeaseDetail } from './contract.ts';
import { historyOf, leaseOf, lineStandingOf } from './shapes.ts';

/** A lease as `GET /v1/leases/{id}` and `slipway lease show` give it: its fields, its place in line while it waits, its queue and timeline. */
export async function readLeaseDetail(db: Db, id: number): Promise<LeaseDetail> {
  const lease = leaseOf(await findLease(db, id));
  const line = await readLineStanding(db, id);
  return { lease, line: line ? lineStandingOf(line) : null, ...historyOf(await readHistory(db, { kind: 'lease', id })) };
}
