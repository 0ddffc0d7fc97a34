import type { BlueprintRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { countReservedPromise, type ReservationNow, reservationsNow } from '../sql/reservedSlots.ts';
import { peakReserved } from '../../domain/reservations.ts';
import { formatTime } from '../../domain/times.ts';

/** A time past every window: the bound of a lease with no time limit. */
const NEVER = new Date(8_640_000_000_000_000);

/**
 * How much sooner than a window opens a lease served from its slots must
 * end: its hold counts from its grant, which comes after the decision that
 * serves it (the resource's drain, then the lease's), by this much at most
 * on a busy system.
 */
export const BACKFILL_MARGIN_MS = 1000;

/**
 * The slots a blueprint's reservations hold back, as one decision sees them
 * (decision 0045), from the leases that do not name them:
 *
 * - a reservation whose window is open holds back what its leases do not
 *   use yet; its own leases are served from it first, ahead of the line;
 * - one whose window is to come holds back its slots from a lease that
 *   could still hold a slot when the window opens: one whose blueprint's
 *   longest hold (counted from now) does not end it before then, or that
 *   has no time limit. A lease that would end before it is served from
 *   those slots meanwhile (backfill).
 *
 * The line is served only from the room beyond what is held back: at the
 * moment, between now and the end of the line's leases' longest hold, when
 * the reservations hold the most together. Read only while the blueprint
 * has a reservation that has not ended (`reserved_until`).
 */
export class ReservedRoom {
  private readonly now = new Date();

  private constructor(
    private readonly trx: Db,
    /** The reservations open or to come, oldest first, with what their leases use (kept up to date as the decision serves). */
    private readonly windows: Array<ReservationNow & { used: number }>,
    /** How long a lease granted now may hold its slot (null: no limit). */
    private readonly maxHoldMs: number | null,
  ) {}

  static async read(trx: Db, blueprint: BlueprintRow): Promise<ReservedRoom> {
    const ahead = blueprint.reserved_until !== null && blueprint.reserved_until.getTime() > Date.now();
    const windows = ahead ? (await reservationsNow(trx, blueprint.id)).map((r) => ({ ...r })) : [];
    return new ReservedRoom(trx, windows, blueprint.max_hold_ms);
  }

  /** The ids of the reservations open now. */
  get openIds(): number[] {
    return this.windows.filter((r) => r.open).map((r) => r.id);
  }

  /** The slots the open reservations' leases do not use yet: what they need of the room now. */
  unusedNow(): number {
    return this.windows.reduce((n, r) => n + this.unused(r.id), 0);
  }

  /** The open reservations that still have slots for their leases. */
  get wanting(): readonly ReservationNow[] {
    return this.windows.filter((r) => r.open && this.unused(r.id) > 0);
  }

  /** Slots of open reservation `id` its leases do not use yet (0 for one not open now: its leases are served as any). */
  unused(id: number | undefined): number {
    const r = this.windows.find((o) => o.id === id && o.open);
    return r === undefined ? 0 : Math.max(0, r.slots - r.used);
  }

  /** What is held back from a lease of the line, and for which reservations (see the class). */
  private holding(): { slots: number; by: number[] } {
    if (this.windows.length === 0) return { slots: 0, by: [] };
    const bound = this.maxHoldMs === null ? NEVER : new Date(this.now.getTime() + this.maxHoldMs + BACKFILL_MARGIN_MS);
    return peakReserved(
      this.windows.map((r) => ({
        id: r.id,
        slots: r.open ? this.unused(r.id) : r.slots,
        startsAt: r.open ? this.now : r.startsAt,
        endsAt: r.endsAt,
      })),
      this.now,
      bound,
    );
  }

  /** The slots held back from a lease of the line. */
  heldBack(): number {
    return this.holding().slots;
  }

  /** A lease of reservation `id` was served from it. */
  served(id: number): void {
    this.windows.find((o) => o.id === id)!.used++;
    countReservedPromise(this.trx, id);
  }

  /** What is held back, for the line's message: "2 slot(s) held for reservation(s) 3 (open), 4 (from …)". */
  describe(): string | undefined {
    const { slots, by } = this.holding();
    if (slots === 0) return undefined;
    const each = by
      .map((id) => this.windows.find((w) => w.id === id)!)
      .filter((r) => !r.open || this.unused(r.id) > 0)
      .map((r) => (r.open ? String(r.id) : `${r.id} (from ${formatTime(r.startsAt)})`));
    return `${slots} slot(s) held for reservation(s) ${each.join(', ')}`;
  }
}
