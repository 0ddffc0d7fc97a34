import type { Db } from '../db/Database.ts';
import type { MaintenanceDue } from '../db/maintenanceDue.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, NotFoundError } from '../domain/errors.ts';
import { appendCommand } from '../queue/appendCommand.ts';
import { describeObject, type ObjectRef } from '../db/objectTables.ts';
import type { Logger } from '../log.ts';

/** Every command the collector issues is recorded as this actor. */
export const GC_ACTOR = { issuedBy: 'system:gc', source: 'gc' } as const satisfies Actor;

/** The collector's settings (from src/config.ts). */
export interface GcSettings {
  /** How long an idle resource is kept while leases wait at its full blueprint. */
  readonly idleGraceMs: number;
  /** How long destroyed objects and their history are kept. */
  readonly retentionMs: number;
  /** At most this many rows looked at (or actions taken) per step of a pass. */
  readonly batchSize: number;
  /** A pass stops starting new work once this much time has gone. */
  readonly budgetMs: number;
  /** How long an orphan goes unmatched before it is destroyed; and how long a destroyed resource (or lease) still accounts for what its driver lists (or the slot). */
  readonly orphanGraceMs: number;
  /** Whether a pass vacuums and analyzes the tables autovacuum does not look after. */
  readonly maintainTables: boolean;
}

/** One command the collector asked for, and what became of the request. */
export interface GcAction {
  readonly target: string;
  readonly kind: string;
  readonly reason: string;
  /** The command that will do it (an equivalent one already queued, when coalesced). */
  readonly commandId?: number;
  readonly coalesced?: boolean;
  /** Why it was not queued: the object moved on since the collector looked. */
  readonly refused?: string;
}

/** What one step of a pass found and did. */
export interface StepReport {
  readonly found: number;
  readonly actions: GcAction[];
  /** Counts of rows removed, for pruning. */
  readonly pruned?: Record<string, number>;
  /** Tables vacuumed or analyzed, for table maintenance. */
  readonly maintained?: readonly MaintenanceDue[];
  /** True when the step stopped at its batch size or the pass's time budget. */
  readonly truncated: boolean;
}

/** A pass's shared state: its database, settings, deadline and log. */
export class GcPass {
  private readonly deadline: number;

  constructor(
    readonly db: Db,
    readonly settings: GcSettings,
    /** Its gc_passes row, which what it records belongs to. */
    readonly passId: number,
    readonly log: Logger,
  ) {
    this.deadline = Date.now() + settings.budgetMs;
  }

  get outOfTime(): boolean {
    return Date.now() >= this.deadline;
  }

  /**
   * Asks an object for something, as `system:gc` (or the system part named
   * by `issuedBy`, e.g. `system:deadline`), the one way everyone does. An
   * object that moved on since the collector looked refuses; that is
   * recorded, not thrown: the next pass looks again.
   */
  async request(target: ObjectRef, kind: string, reason: string, payload?: unknown, issuedBy: string = GC_ACTOR.issuedBy): Promise<GcAction> {
    const base = { target: `${target.kind}:${target.id}`, kind, reason };
    try {
      const { command, coalesced } = await appendCommand(this.db, { target, kind, payload, actor: { ...GC_ACTOR, issuedBy, reason } });
      return { ...base, commandId: command.id, coalesced };
    } catch (error) {
      if (error instanceof CommandRejectedError || error instanceof NotFoundError) {
        return { ...base, refused: `${describeObject(target)}: ${error.message}` };
      }
      throw error;
    }
  }
}
