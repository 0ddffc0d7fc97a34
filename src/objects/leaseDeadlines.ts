import { type RawBuilder, sql } from 'kysely';
import type { LeaseRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';

/**
 * A heartbeat lease is released when this many of its intervals pass without
 * a renewal: one late or lost beat is forgiven, two are not. (The issue is
 * silent; this is what lease-based membership such as Kubernetes node leases
 * does, and it keeps a holder beating "every interval" safe.)
 */
export const HEARTBEAT_INTERVALS_MISSED = 2;

export interface LeaseDeadlines {
  readonly expires_at?: Date;
  readonly heartbeat_deadline?: Date;
}

/** A time `ms` from now on the database's clock, as an SQL expression (for a statement that writes it itself: createLease). */
export function fromNow(ms: number): RawBuilder<Date> {
  return sql<Date>`now() + make_interval(secs => ${ms / 1000}::float8)`;
}

/**
 * A lease's deadlines counted from now, on the database's clock: the same
 * clock the collector compares them with, so worker clocks do not matter.
 */
export async function deadlinesFromNow(db: Db, lengths: { termMs?: number | null; heartbeatMs?: number | null }): Promise<LeaseDeadlines> {
  const { termMs, heartbeatMs } = lengths;
  if (!termMs && !heartbeatMs) return {};
  const { rows } = await sql<{ expires: Date | null; heartbeat: Date | null }>`
    select ${fromNow(termMs ?? 0)} as expires, ${fromNow((heartbeatMs ?? 0) * HEARTBEAT_INTERVALS_MISSED)} as heartbeat
  `.execute(db);
  const row = rows[0]!;
  return {
    ...(termMs ? { expires_at: row.expires! } : {}),
    ...(heartbeatMs ? { heartbeat_deadline: row.heartbeat! } : {}),
  };
}

/** Why a lease is past one of its deadlines (as of the database's now), or undefined if it is not. */
export async function expiryReason(db: Db, lease: Pick<LeaseRow, 'expires_at' | 'heartbeat_deadline' | 'heartbeat_ms'>): Promise<string | undefined> {
  const { rows } = await sql<{ now: Date }>`select now() as now`.execute(db);
  return describeExpiry(lease, rows[0]!.now);
}

/** The reason the collector gives, and the release re-checks when it is applied. */
export function describeExpiry(lease: Pick<LeaseRow, 'expires_at' | 'heartbeat_deadline' | 'heartbeat_ms'>, now: Date): string | undefined {
  if (lease.expires_at && lease.expires_at.getTime() <= now.getTime()) {
    return `expired: its expiry time ${lease.expires_at.toISOString()} passed`;
  }
  if (lease.heartbeat_deadline && lease.heartbeat_deadline.getTime() <= now.getTime()) {
    return `expired: no heartbeat renewal for ${HEARTBEAT_INTERVALS_MISSED} × ${lease.heartbeat_ms} ms (deadline ${lease.heartbeat_deadline.toISOString()})`;
  }
  return undefined;
}
