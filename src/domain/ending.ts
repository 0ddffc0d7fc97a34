import { z } from 'zod';
import type { SystemPart } from './Actor.ts';
import { formatDuration } from './durations.ts';

/**
 * What a lease's holder is told ahead of the end Slipway will give its
 * lease, whatever the holder does: the lease's `ending`, written by the
 * lease's own drain (a `notify_ending` command), shown by the API, the CLI,
 * the web UI and callbacks, and acted on by `withLease` and `lease run`
 * (they stop the work). `at` is the time by which the lease ends.
 *
 * One notice for every such end, so a holder handles them all alike; per
 * kind, who ends the lease at `at` if its holder has not, and what the kind
 * means (the API's description).
 */
export const ENDINGS = {
  time_limit: { endedBy: 'deadline', means: "its blueprint's longest hold (maxHoldMs)" },
  preempted: { endedBy: 'preemption', means: 'preempted for a waiting lease of higher priority: its grace period (preemption.graceMs)' },
  reservation_end: { endedBy: 'deadline', means: 'the end of the window of the reservation it was created to use' },
  reclaimed: {
    endedBy: 'preemption',
    means: "its slot reclaimed for a reservation whose window is open: its blueprint's grace period (preemption.graceMs, 5 minutes unless set)",
  },
} as const satisfies Record<string, { endedBy: SystemPart; means: string }>;
export type EndingKind = keyof typeof ENDINGS;
export const ENDING_KINDS = Object.keys(ENDINGS) as [EndingKind, ...EndingKind[]];

export const EndingSchema = z
  .object({
    kind: z.enum(ENDING_KINDS),
    at: z.iso.datetime({ offset: true }),
    reason: z.string().min(1).max(1000),
  })
  .strict();
export type Ending = z.infer<typeof EndingSchema>;

/** An end the holder was told of, withdrawn: only one of `kind` (a later notice of another kind stands). */
export const EndingWithdrawalSchema = z
  .object({
    kind: z.enum(ENDING_KINDS),
    reason: z.string().min(1).max(1000),
  })
  .strict();

/** The longest notice a lease gets before its time limit. */
const NOTICE_AT_MOST_MS = 5 * 60_000;
/** The share of the longest hold a shorter hold's notice is. */
const NOTICE_SHARE = 0.1;

/**
 * How long before its time limit a lease's holder is told: a tenth of the
 * longest hold, at most five minutes. Long enough for work to wrap up, and
 * a short limit (seconds, in tests) still leaves most of the hold to work.
 */
export function noticeBeforeMs(maxHoldMs: number): number {
  return Math.min(NOTICE_AT_MOST_MS, Math.round(maxHoldMs * NOTICE_SHARE));
}

/** The end a lease granted at `grantedAt` has under a longest hold of `maxHoldMs`, and when its holder is told. */
export function timeLimitFrom(grantedAt: Date, maxHoldMs: number): { endBy: Date; noticeAt: Date } {
  const endBy = new Date(grantedAt.getTime() + maxHoldMs);
  return { endBy, noticeAt: new Date(endBy.getTime() - noticeBeforeMs(maxHoldMs)) };
}

/** The end a lease's own limits give it, which kind of end it is, and when its holder is told. */
export interface HoldEnd {
  readonly kind: 'time_limit' | 'reservation_end';
  readonly endBy: Date;
  readonly noticeAt: Date;
}

/**
 * The end of a lease granted at `grantedAt`: the sooner of its blueprint's
 * longest hold and the end of its reservation's window (decision 0045),
 * told as far ahead as a time limit of that length would be; undefined
 * with neither.
 */
export function holdEndOf(grantedAt: Date, maxHoldMs: number | null, reservationEndsAt: Date | null): HoldEnd | undefined {
  const limit = maxHoldMs === null ? undefined : timeLimitFrom(grantedAt, maxHoldMs);
  if (reservationEndsAt !== null && (limit === undefined || reservationEndsAt < limit.endBy)) {
    const heldMs = Math.max(0, reservationEndsAt.getTime() - grantedAt.getTime());
    return { kind: 'reservation_end', endBy: reservationEndsAt, noticeAt: new Date(reservationEndsAt.getTime() - noticeBeforeMs(heldMs)) };
  }
  return limit && { kind: 'time_limit', ...limit };
}

/** What of a lease says why it ends at its `end_by` (with its blueprint's name, for a time limit's reason). */
export interface EndFields {
  readonly end_by: Date;
  readonly granted_at: Date | null;
  readonly created_at: Date;
  readonly reservation_id: number | null;
  readonly reservation_ends_at: Date | null;
  readonly blueprint_name?: string;
}

/** Why a lease ends at its `end_by`, when its holder has not been told another end: its reservation's window, or its time limit. */
export function endReasonOf(lease: EndFields): { kind: HoldEnd['kind']; reason: string } {
  if (lease.reservation_ends_at !== null && lease.reservation_ends_at.getTime() === lease.end_by.getTime()) {
    return { kind: 'reservation_end', reason: `reached the end of reservation ${lease.reservation_id}'s window` };
  }
  return { kind: 'time_limit', reason: timeLimitReason(lease.blueprint_name, lease.granted_at ?? lease.created_at, lease.end_by) };
}

/** A blueprint's time limit, as messages name it: "blueprint ci's longest hold of 2h". */
export function describeTimeLimit(blueprintName: string | undefined, maxHoldMs: number): string {
  return `${blueprintName === undefined ? "its blueprint's" : `blueprint ${blueprintName}'s`} longest hold of ${formatDuration(maxHoldMs)}`;
}

/** Why a lease granted at `grantedAt` ends at `endBy`, its time limit: "reached blueprint ci's longest hold of 2h". */
export function timeLimitReason(blueprintName: string | undefined, grantedAt: Date, endBy: Date): string {
  return `reached ${describeTimeLimit(blueprintName, endBy.getTime() - grantedAt.getTime())}`;
}

/** A lease's `ending` column read back (jsonb), or null. */
export function endingOf(column: unknown): Ending | null {
  return column === null || column === undefined ? null : EndingSchema.parse(column);
}

/** A blueprint's maxHoldMs as the CLI and the web UI show it. */
export function describeLongestHold(maxHoldMs: number | null): string {
  return maxHoldMs === null
    ? 'no limit'
    : `${formatDuration(maxHoldMs)} from its grant, renewals included; its holder is told ${formatDuration(noticeBeforeMs(maxHoldMs))} ahead`;
}
