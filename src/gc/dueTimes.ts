import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import type { DeadlineFields } from '../objects/leaseDeadlines.ts';
import type { EndFields } from '../domain/ending.ts';

/**
 * The time-driven work's SQL: which leases are past a deadline or due a
 * notice of their end, which resources are due a health check, and when
 * the next of these falls due.
 * Every worker's timekeeper runs `peekDueTimes` about once a second, so each
 * read here is a range of a partial index, whatever the size of the tables.
 *
 * The state lists are written in the SQL, the same as the partial indexes'
 * predicates (leases_expiring, leases_heartbeat_due, leases_wait_due from
 * earlier migrations; resources_check_due, 0029; leases_end_due and
 * leases_end_notice_due, 0035), so that the planner proves
 * each index usable with a generic plan too. test/gc/dueTimes.test.ts checks
 * that they are still the state table's (src/domain/lifecycle.ts).
 */
export const DUE_STATES = {
  /** Leases that can still be released for a passed expiry, heartbeat deadline or end (or told of their end). */
  expirable: ['pending', 'acquired', 'active'],
  /** Leases still setting up, whose wait deadline counts. */
  settingUp: ['pending', 'acquired'],
  /** Resources that take a `check`. */
  checkable: ['active', 'maintenance', 'quarantined'],
} as const;

const list = (states: readonly string[]) => sql.raw(`(${states.map((s) => `'${s}'`).join(', ')})`);
const EXPIRABLE = list(DUE_STATES.expirable);
const SETTING_UP = list(DUE_STATES.settingUp);
const CHECKABLE = list(DUE_STATES.checkable);

/** A blueprint `b`'s check interval, as an interval. */
const interval = sql`make_interval(secs => b.check_interval_ms / 1000.0)`;
/** A resource `r`'s last check, the never-checked first (the index's expression, 0029). */
const lastCheck = sql`coalesce(r.checked_at, '-infinity'::timestamptz)`;

/** A release on its way to lease `l` (its dedup key's unique index answers). */
const releaseUnderWay = sql`exists (
  select 1 from commands c
  where c.target_kind = 'lease' and c.target_id = l.id and c.dedup_key = 'release' and c.status in ('queued', 'running'))`;
/** A check on its way to resource `r`. */
const checkUnderWay = sql`exists (
  select 1 from commands c
  where c.target_kind = 'resource' and c.target_id = r.id and c.dedup_key = 'check' and c.status in ('queued', 'running'))`;

/** The ids of the leases past a deadline now: one index range per kind of deadline. */
const pastDeadline = sql`(
  select id from leases where expires_at <= now() and state in ${EXPIRABLE}
  union select id from leases where heartbeat_deadline <= now() and state in ${EXPIRABLE}
  union select id from leases where end_by <= now() and state in ${EXPIRABLE}
  union select id from leases where wait_deadline <= now() and state in ${SETTING_UP})`;

/** A notice of its end on its way to lease `l`. */
const noticeUnderWay = sql`exists (
  select 1 from commands c
  where c.target_kind = 'lease' and c.target_id = l.id and c.dedup_key = 'notify_ending' and c.status in ('queued', 'running'))`;

/** The ids of the leases whose holders are due a notice of their end now (leases_end_notice_due, 0035). */
const noticeDue = sql`(select id from leases where end_notice_at <= now() and state in ${EXPIRABLE})`;

/** Resources of blueprint `b` due a check now, longest unchecked first, at most `limit`, with none on its way. */
const dueChecksOf = (limit: number) => sql`
  select r.id, r.checked_at from resources r
  where r.blueprint_id = b.id and r.state in ${CHECKABLE}
    and ${lastCheck} <= now() - ${interval}
    and not ${checkUnderWay}
  order by ${lastCheck}, r.id
  limit ${limit}`;

export interface DuePeek {
  /** Something is due now with nothing on its way for it. */
  readonly dueNow: boolean;
  /** How long until the next deadline or check known now falls due (null: none). */
  readonly nextDueInMs: number | null;
}

/**
 * Whether anything is due now, and how soon the next thing is, in one
 * statement (at idle, the only one a timekeeper runs). Times are the
 * database's, so workers' clocks do not matter. "Next" looks only after now:
 * what is due now but already has its command on its way is not counted
 * either way, so a slow release or check does not make the caller spin.
 */
export async function peekDueTimes(db: Db): Promise<DuePeek> {
  const { rows } = await PEEK.execute(db);
  const row = rows[0]!;
  return { dueNow: row.due_now, nextDueInMs: row.next_due_in_ms };
}

/** peekDueTimes' statement (exported for the test that checks its plan reads indexes only). */
export const PEEK = sql<{ due_now: boolean; next_due_in_ms: number | null }>`
    select
      exists (select 1 from leases l where l.id in ${pastDeadline} and not ${releaseUnderWay})
        or exists (select 1 from leases l where l.id in ${noticeDue} and not ${noticeUnderWay})
        or exists (select 1 from blueprints b cross join lateral (${dueChecksOf(1)}) r where b.check_interval_ms is not null)
        as due_now,
      extract(epoch from least(
        (select min(expires_at) from leases where expires_at > now() and state in ${EXPIRABLE}),
        (select min(heartbeat_deadline) from leases where heartbeat_deadline > now() and state in ${EXPIRABLE}),
        (select min(wait_deadline) from leases where wait_deadline > now() and state in ${SETTING_UP}),
        (select min(end_by) from leases where end_by > now() and state in ${EXPIRABLE}),
        (select min(end_notice_at) from leases where end_notice_at > now() and state in ${EXPIRABLE}),
        (select min(n.due) from blueprints b cross join lateral (
          select ${lastCheck} + ${interval} as due from resources r
          where r.blueprint_id = b.id and r.state in ${CHECKABLE} and ${lastCheck} > now() - ${interval}
          order by ${lastCheck} limit 1) n
         where b.check_interval_ms is not null)
      ) - now())::float8 * 1000 as next_due_in_ms
  `;

export type DueLease = DeadlineFields & { id: number; now: Date };

/** Leases past a deadline with no release on its way, the longest overdue first, at most `limit`. */
export async function dueLeases(db: Db, limit: number): Promise<DueLease[]> {
  const { rows } = await sql<DueLease>`
    select l.id, l.state, l.expires_at, l.heartbeat_deadline, l.heartbeat_ms, l.wait_deadline, l.created_at,
           l.granted_at, l.end_by, l.ending, l.reservation_id, l.reservation_ends_at, b.name as blueprint_name, now() as now
    from leases l join blueprints b on b.id = l.blueprint_id
    where l.id in ${pastDeadline} and not ${releaseUnderWay}
    order by least(l.expires_at, l.heartbeat_deadline, l.wait_deadline, l.end_by), l.id
    limit ${limit}
  `.execute(db);
  return rows;
}

export interface DueNotice extends EndFields {
  readonly id: number;
  readonly blueprint_name: string;
}

/** Leases whose holders are due a notice of their time limit with none on its way, the earliest first, at most `limit`. */
export async function dueNotices(db: Db, limit: number): Promise<DueNotice[]> {
  const { rows } = await sql<DueNotice>`
    select l.id, l.end_by, l.granted_at, l.created_at, l.reservation_id, l.reservation_ends_at, b.name as blueprint_name
    from leases l join blueprints b on b.id = l.blueprint_id
    where l.id in ${noticeDue} and not ${noticeUnderWay}
    order by l.end_notice_at, l.id
    limit ${limit}
  `.execute(db);
  return rows;
}

export interface DueCheck {
  readonly id: number;
  readonly checked_at: Date | null;
  readonly check_interval_ms: number;
}

/** Resources due a check with none on its way, longest unchecked first, at most `limit`. */
export async function dueChecks(db: Db, limit: number): Promise<DueCheck[]> {
  const { rows } = await sql<DueCheck>`
    select r.id, r.checked_at, b.check_interval_ms
    from blueprints b cross join lateral (${dueChecksOf(limit)}) r
    where b.check_interval_ms is not null
    order by r.checked_at nulls first, r.id
    limit ${limit}
  `.execute(db);
  return rows;
}

/**
 * Deletes the collector's settled checks of these resources that recorded
 * no event: the answer was the one before, so they caused nothing and nobody
 * waits on them. A resource checked every few seconds so keeps one row for
 * its latest unchanged check (its `checked_at`), not one per check. An
 * operator's check is a person's request and stays.
 */
export async function forgetUnchangedChecks(db: Db, resourceIds: readonly number[]): Promise<void> {
  if (resourceIds.length === 0) return;
  await sql`
    delete from commands c
    where c.target_kind = 'resource' and c.target_id = any(${resourceIds}::bigint[])
      and c.kind = 'check' and c.source = 'gc' and c.status = 'done'
      and not exists (select 1 from events e where e.command_id = c.id)
      -- Nor one that a request joined: its row names it.
      and not exists (select 1 from commands x where x.coalesced_into = c.id)
  `.execute(db);
}
