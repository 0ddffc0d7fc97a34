import type { ObjectKind } from '../../../migrations/schema.ts';
import type { Db } from '../../../src/db/Database.ts';

export interface StateTrail {
  /** The state it was created in, then the target of every transition, in event order. */
  readonly states: string[];
  /** Transitions whose from_state is not the state before them: a lost or doubled change. */
  readonly breaks: string[];
}

/** Every object's state history, read back from its event log (ordered by event id). */
export async function stateTrails(db: Db, kind: ObjectKind): Promise<Map<number, StateTrail>> {
  const events = await db
    .selectFrom('events')
    .select(['id', 'target_id', 'type', 'from_state', 'to_state'])
    .where('target_kind', '=', kind)
    .where('type', 'in', ['created', 'state'])
    .orderBy('id')
    .execute();
  const trails = new Map<number, StateTrail>();
  for (const event of events) {
    let trail = trails.get(event.target_id);
    if (!trail) {
      trail = { states: [], breaks: [] };
      trails.set(event.target_id, trail);
    }
    const previous = trail.states.at(-1) ?? null;
    if (event.type === 'state' && event.from_state !== previous) {
      trail.breaks.push(`event ${event.id}: ${event.from_state} → ${event.to_state} after ${previous}`);
    }
    if (event.type === 'created' && previous !== null) trail.breaks.push(`event ${event.id}: created twice`);
    trail.states.push(event.to_state!);
  }
  return trails;
}

/** Objects whose history is not exactly `expected`, with what it was instead. */
export function trailsOtherThan(trails: Map<number, StateTrail>, expected: readonly string[]): string[] {
  return [...trails]
    .filter(([, t]) => t.breaks.length > 0 || t.states.join('→') !== expected.join('→'))
    .map(([id, t]) => `${id}: ${t.states.join('→')}${t.breaks.length ? ` (${t.breaks.join('; ')})` : ''}`);
}

/** Breaks in any object's history of this kind. */
export function trailBreaks(trails: Map<number, StateTrail>): string[] {
  return [...trails].flatMap(([id, t]) => t.breaks.map((b) => `${id}: ${b}`));
}

/**
 * The most resources of one blueprint that were ever live at once, replayed
 * from their `created` and `→ destroyed` events. Event ids are taken in the
 * order the writes happened, and a resource is only created after the
 * destruction that made room for it committed, so the replay is faithful.
 */
export async function peakLiveResources(db: Db, blueprintId: number): Promise<number> {
  const events = await db
    .selectFrom('events')
    .innerJoin('resources', 'resources.id', 'events.target_id')
    .select(['events.type'])
    .where('events.target_kind', '=', 'resource')
    .where('resources.blueprint_id', '=', blueprintId)
    .where((eb) => eb.or([eb('events.type', '=', 'created'), eb.and([eb('events.type', '=', 'state'), eb('events.to_state', '=', 'destroyed')])]))
    .orderBy('events.id')
    .execute();
  let live = 0;
  let peak = 0;
  for (const event of events) {
    live += event.type === 'created' ? 1 : -1;
    peak = Math.max(peak, live);
  }
  return peak;
}

/** The most slots any one resource had granted at once, from its slot events, with its capacity. */
export async function peakSlotsUsed(db: Db, blueprintId: number): Promise<{ resourceId: number; peak: number; capacity: number }[]> {
  const events = await db
    .selectFrom('events')
    .innerJoin('resources', 'resources.id', 'events.target_id')
    .select(['events.target_id', 'events.type', 'resources.capacity'])
    .where('events.target_kind', '=', 'resource')
    .where('resources.blueprint_id', '=', blueprintId)
    .where('events.type', 'in', ['slot_granted', 'slot_freed'])
    .orderBy('events.id')
    .execute();
  const used = new Map<number, { resourceId: number; now: number; peak: number; capacity: number }>();
  for (const event of events) {
    const entry = used.get(event.target_id) ?? { resourceId: event.target_id, now: 0, peak: 0, capacity: event.capacity };
    entry.now += event.type === 'slot_granted' ? 1 : -1;
    entry.peak = Math.max(entry.peak, entry.now);
    used.set(event.target_id, entry);
  }
  return [...used.values()].map(({ resourceId, peak, capacity }) => ({ resourceId, peak, capacity }));
}
