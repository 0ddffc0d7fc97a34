import { type RawBuilder, sql } from 'kysely';
import type { LeaseRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { systemActorName } from '../domain/Actor.ts';
import { isSettingUp } from '../domain/lifecycle.ts';
import { formatDuration } from '../domain/durations.ts';
import { formatTime } from '../domain/times.ts';
import { type EndingKind, ENDINGS, endReasonOf, endingOf } from '../domain/ending.ts';

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

/** A lease past one of its deadlines: why, and who the collector releases it as. */
export interface PastDeadline {
  readonly reason: string;
  /**
   * `system:gc` for its expiry or heartbeat; `system:deadline` for a lease
   * not active by its wait deadline, or at its time limit; at its end
   * (`end_by`), whoever its notice's kind says (`system:preemption` at the
   * end of a preemption's grace period).
   */
  readonly issuedBy: `system:${'gc' | (typeof ENDINGS)[EndingKind]['endedBy']}`;
}

/** What of a lease its deadlines depend on (and its blueprint's name, where read with it: the reason of a time limit names it). */
export type DeadlineFields = Pick<
  LeaseRow,
  | 'state'
  | 'expires_at'
  | 'heartbeat_deadline'
  | 'heartbeat_ms'
  | 'wait_deadline'
  | 'created_at'
  | 'granted_at'
  | 'end_by'
  | 'ending'
  | 'reservation_id'
  | 'reservation_ends_at'
> & { readonly blueprint_name?: string };

/** Why a lease is past one of its deadlines (as of the database's now), or undefined if it is not. */
export async function pastDeadline(db: Db, lease: DeadlineFields): Promise<PastDeadline | undefined> {
  const { rows } = await sql<{ now: Date }>`select now() as now`.execute(db);
  return describeDeadline(lease, rows[0]!.now);
}

/**
 * Why a lease is past a deadline at `now`: the reason the collector gives,
 * and the release checks again when it is applied. The wait deadline counts
 * only while the lease is setting up (not active yet): one granted before the
 * collector's release is applied keeps its slot.
 */
export function describeDeadline(lease: DeadlineFields, now: Date): PastDeadline | undefined {
  const passed = (at: Date | null): at is Date => at !== null && at.getTime() <= now.getTime();
  // Before the expiry: an expiry a time limit capped passes with it, and the limit is the reason.
  if (passed(lease.end_by)) {
    return { reason: endReason(lease, lease.end_by), issuedBy: systemActorName(ENDINGS[endingOf(lease.ending)?.kind ?? 'time_limit'].endedBy) };
  }
  if (passed(lease.expires_at)) return { reason: `expired: its expiry time ${formatTime(lease.expires_at)} passed`, issuedBy: systemActorName('gc') };
  if (passed(lease.heartbeat_deadline)) {
    return {
      reason: `expired: no heartbeat renewal for ${HEARTBEAT_INTERVALS_MISSED} × ${formatDuration(lease.heartbeat_ms!)} (deadline ${formatTime(lease.heartbeat_deadline)})`,
      issuedBy: systemActorName('gc'),
    };
  }
  if (passed(lease.wait_deadline) && isSettingUp('lease', lease.state)) {
    const waited = formatDuration(Math.round((lease.wait_deadline.getTime() - lease.created_at.getTime()) / 1000) * 1000);
    return {
      reason: `deadline: not active by its wait deadline ${formatTime(lease.wait_deadline)} (${waited} after it was requested)`,
      issuedBy: systemActorName('deadline'),
    };
  }
  return undefined;
}

/** Why a lease ends at its `end_by`: what its holder was told, or its time limit or reservation's end when the notice has not been given yet. */
function endReason(lease: DeadlineFields, endBy: Date): string {
  return endingOf(lease.ending)?.reason ?? endReasonOf({ ...lease, end_by: endBy }).reason;
}
