import type { BlueprintRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { countReservedPromise, type ReservationNow, reservationsNow } from '../../db/reservedSlots.ts';

/**
 * The slots a blueprint's open reservations hold back, as one decision
 * sees them (decision 0045): each reservation whose window is open holds
 * back what its leases do not use yet, from every lease that does not name
 * it. Its own leases are served from it first, ahead of the line; the line
 * is served only from the room beyond what is held back. Read only while
 * the blueprint has a reservation that has not ended (`reserved_until`).
 */
export class ReservedRoom {
  private constructor(
    private readonly trx: Db,
    /** The reservations open now, oldest first, with what their leases use (kept up to date as the decision serves). */
    private readonly open: Array<{ readonly id: number; readonly slots: number; used: number }>,
  ) {}

  static async read(trx: Db, blueprint: BlueprintRow): Promise<ReservedRoom> {
    const ahead = blueprint.reserved_until !== null && blueprint.reserved_until.getTime() > Date.now();
    return new ReservedRoom(trx, ahead ? (await reservationsNow(trx, blueprint.id)).map((r) => ({ ...r })) : []);
  }

  /** The open reservations that still have slots for their leases. */
  get wanting(): readonly ReservationNow[] {
    return this.open.filter((r) => this.unused(r.id) > 0);
  }

  /** Slots of reservation `id` its leases do not use yet (0 for one not open now: its leases are served as any). */
  unused(id: number | undefined): number {
    const r = this.open.find((o) => o.id === id);
    return r === undefined ? 0 : Math.max(0, r.slots - r.used);
  }

  /** The slots held back from the line: what the open reservations' leases do not use yet. */
  heldBack(): number {
    return this.open.reduce((n, r) => n + this.unused(r.id), 0);
  }

  /** A lease of reservation `id` was served from it. */
  served(id: number): void {
    this.open.find((o) => o.id === id)!.used++;
    countReservedPromise(this.trx, id);
  }

  /** What is held back, for the line's message: "2 slot(s) held for reservation(s) 3, 4". */
  describe(): string | undefined {
    const holding = this.open.filter((r) => this.unused(r.id) > 0);
    if (holding.length === 0) return undefined;
    return `${this.heldBack()} slot(s) held for reservation(s) ${holding.map((r) => r.id).join(', ')}`;
  }
}
