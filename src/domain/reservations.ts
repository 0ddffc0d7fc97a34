import { z } from 'zod';
import { formatTime } from './times.ts';
import { TeamNameSchema } from './team.ts';

/**
 * Advance reservations (docs/scheduling.md, "Reservations"; decision 0045):
 * `slots` of one blueprint held from `from` to `to` for the leases that
 * name the reservation, and that its team and holders (if it has them)
 * allow. Pure rules: the input, whether the blueprint's capacity can honour
 * a new one beside those that overlap it, and whether a lease may use one.
 */

/** What each moment of a reservation's window its blueprint acts on means (its `reservation_due` command). */
export const RESERVATION_MOMENTS = {
  start: 'its window opened: the slots its leases do not use are held for them, and reclaimed from other leases if need be',
  hand_back: 'the slots its leases do not use are handed back to the line',
  end: 'its window ended: the slots it held back go to the line',
} as const;

/** Where a reservation stands now: its window not yet open, open, over, or cancelled. */
export const RESERVATION_STATES = ['upcoming', 'active', 'ended', 'cancelled'] as const;
export type ReservationState = (typeof RESERVATION_STATES)[number];

/** A window's end, as text: ISO 8601 with its offset. */
const isoTime = (example: string, description: string) =>
  z.iso.datetime({ offset: true, message: `expected an ISO 8601 time with its offset, e.g. ${example}` }).meta({ description });

/** The most slots one reservation may hold. */
const MAX_SLOTS = 100_000;

/** What every interface's reservation request has beside the blueprint (and the API's reason). */
const RESERVATION_FIELDS = {
  slots: z
    .number()
    .int('expected a whole number of slots')
    .min(1, 'expected at least 1 slot')
    .max(MAX_SLOTS, `expected at most ${MAX_SLOTS} slots`)
    .meta({ description: 'how many slots to hold back' }),
  from: isoTime('2030-01-01T18:00:00Z', 'the window opens'),
  to: isoTime('2030-01-01T22:00:00Z', 'the window ends: after from, and in the future'),
  team: TeamNameSchema.optional().meta({ description: 'only leases of this team may use it' }),
  handBackAfterMs: z
    .number()
    .int()
    .min(1000, 'expected at least 1 s')
    .max(366 * 86_400_000, 'expected at most 366 days')
    .optional()
    .meta({
      description:
        'hand the slots its leases do not use back to the line this long after the window opens (default: held to its end); its leases keep what they hold',
    }),
  holders: z
    .array(z.string().min(1).max(200))
    .min(1, 'expected at least one holder, or leave holders out')
    .max(100)
    .optional()
    .meta({ description: "only leases of these holders may use it, as leases name them (token:<name> for a token's leases)" }),
};

type Window = { from: string; to: string };

/** A strict reservation body: `fields` (the blueprint, as each interface names it) plus the window and who may use it, the window checked. */
export function reservationBodySchema<Fields extends z.ZodRawShape>(fields: Fields) {
  return z
    .object({ ...fields, ...RESERVATION_FIELDS })
    .strict()
    .refine((r) => Date.parse((r as Window).from) < Date.parse((r as Window).to), {
      message: 'must be after from: a window ends after it starts',
      path: ['to'],
    })
    .refine((r) => Date.parse((r as Window).to) > Date.now(), {
      message: 'the window is over already: give a window that ends in the future',
      path: ['to'],
    });
}

export const ReservationInputSchema = reservationBodySchema({
  /** The blueprint's name or id. */
  blueprint: z.union([z.string().min(1).max(63), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)]),
});
export type ReservationInput = z.input<typeof ReservationInputSchema>;

/** Who may use a reservation, for people: "team ci, holder(s) token:a, token:b", or "anyone". */
export function describeWhoMay(team: string | null | undefined, holders: readonly string[] | null | undefined): string {
  return [team && `team ${team}`, holders && `holder(s) ${holders.join(', ')}`].filter(Boolean).join(', ') || 'anyone';
}

/** A reservation's window and size, as the capacity check weighs it. */
export interface ReservedWindow {
  readonly id: number;
  readonly slots: number;
  readonly startsAt: Date;
  readonly endsAt: Date;
}

/**
 * The most slots `others` hold at once at any moment of [from, to): a sum
 * of those holding at each moment one of them (or the window) starts.
 */
export function peakReserved(others: readonly ReservedWindow[], from: Date, to: Date): { slots: number; by: number[] } {
  let peak = { slots: 0, by: [] as number[] };
  const moments = [from, ...others.map((o) => o.startsAt).filter((at) => at > from && at < to)];
  for (const at of moments) {
    const holding = others.filter((o) => o.startsAt <= at && o.endsAt > at);
    const slots = holding.reduce((n, o) => n + o.slots, 0);
    if (slots > peak.slots) peak = { slots, by: holding.map((o) => o.id) };
  }
  return peak;
}

/** A reservation as a lease's request judges it. */
export interface ReservationTerms {
  readonly id: number;
  readonly blueprintId: number;
  readonly blueprintName: string;
  readonly startsAt: Date;
  readonly endsAt: Date;
  readonly team: string | null;
  readonly holders: readonly string[] | null;
  readonly cancelledAt: Date | null;
}

/** Why ("its window ended at …") a lease of `team` and `holder` at blueprint `blueprintId` may not use the reservation now, or undefined if it may. */
export function whyNotUsable(
  r: ReservationTerms,
  lease: { readonly team: string; readonly holder: string; readonly blueprintId: number | undefined },
  now: Date,
): string | undefined {
  if (r.cancelledAt !== null) return `it was cancelled at ${formatTime(r.cancelledAt)}: request the lease without it`;
  if (lease.blueprintId !== undefined && lease.blueprintId !== r.blueprintId) {
    return `it is at blueprint ${r.blueprintName}: name that blueprint, or leave the blueprint out`;
  }
  if (now < r.startsAt) return `its window starts at ${formatTime(r.startsAt)}: name it from then, or request the lease without it`;
  if (now >= r.endsAt) return `its window ended at ${formatTime(r.endsAt)}: request the lease without it`;
  if (r.team !== null && r.team !== lease.team) return `it is for team ${r.team}, and this lease would be team ${lease.team}'s`;
  if (r.holders !== null && !r.holders.includes(lease.holder)) {
    return `it is for holder(s) ${r.holders.join(', ')}, and this lease's holder is ${lease.holder}`;
  }
  return undefined;
}
