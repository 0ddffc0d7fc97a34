import type { ObjectKind } from '../../migrations/schema.ts';

/**
 * THE state table. For each kind of object: its states, the states each may
 * move to, and the command kinds each state accepts (those whose handler
 * runs; any other command drained in that state settles as a no-op). The
 * drain checks every transition against it; every caller that appends a
 * command checks the target's state against it first, so an impossible
 * request is refused before it is queued.
 *
 * Whatever else is true of a state is a field here too, read through the
 * accessors below, so no reader keeps its own list of state names:
 *
 *   isSettingUp  the object is on its way to its kind's READY_STATE and
 *                needs no further request to get there (a lease waiting for
 *                capacity has no command in flight, yet a goal); creating a
 *                lease waits for it to leave these states
 *   holdsSlot    a lease in this state holds a slot of its resource: the
 *                driver gave it one, and releasing it gives it back
 *   takesLeases  a blueprint in this state takes new leases
 *   grantsSlots  a resource in this state grants its free slots: its
 *                acquires are served and a slot that comes free is offered
 *                to the waiting line (one still setting up keeps its
 *                acquires waiting; any other refuses them, and each lease
 *                asks its blueprint again)
 *   tone         how the state reads to a person (the web UI colours its
 *                badge by it): good, waiting, busy (under way: a lease that
 *                has its slot and is being activated), quiet (off, or
 *                over), gone, bad
 */
export type StateTone = 'good' | 'waiting' | 'busy' | 'quiet' | 'gone' | 'bad';

export interface StateSpec {
  readonly next: readonly string[];
  readonly accepts: readonly string[];
  readonly isSettingUp?: true;
  readonly holdsSlot?: true;
  readonly takesLeases?: true;
  readonly grantsSlots?: true;
  readonly tone: StateTone;
}

/** The yes/no facts a state may have (see StateSpec). */
export type StateFlag = 'isSettingUp' | 'holdsSlot' | 'takesLeases' | 'grantsSlots';

const lease = {
  pending: {
    next: ['acquired', 'released', 'broken'],
    accepts: ['allocate', 'grant', 'deny', 'release', 'renew', 'resource_gone'],
    isSettingUp: true,
    tone: 'waiting',
  },
  acquired: {
    next: ['active', 'released', 'broken'],
    accepts: ['activate', 'grant', 'deny', 'release', 'renew', 'notify_ending', 'withdraw_ending', 'resource_gone'],
    isSettingUp: true,
    holdsSlot: true,
    tone: 'busy',
  },
  active: {
    next: ['released', 'broken'],
    accepts: ['grant', 'deny', 'release', 'renew', 'notify_ending', 'withdraw_ending', 'resource_gone'],
    holdsSlot: true,
    tone: 'good',
  },
  released: { next: ['destroyed'], accepts: ['destroy', 'grant', 'deny'], tone: 'quiet' },
  broken: { next: ['destroyed'], accepts: ['destroy', 'grant', 'deny', 'release'], tone: 'bad' },
  destroyed: { next: [], accepts: ['grant', 'deny'], tone: 'gone' },
} as const satisfies Record<string, StateSpec>;

const resource = {
  pending: {
    next: ['active', 'released', 'broken'],
    accepts: ['allocate', 'activate', 'acquire', 'release_slot', 'release', 'retire'],
    isSettingUp: true,
    tone: 'waiting',
  },
  active: {
    next: ['maintenance', 'quarantined', 'released', 'broken'],
    accepts: ['acquire', 'release_slot', 'count_slots', 'clean_slot', 'release', 'reclaim', 'retire', 'cordon', 'drain', 'check', 'destroy_orphan'],
    grantsSlots: true,
    tone: 'good',
  },
  // Cordoned by an operator: acquires are refused (the leases ask their
  // blueprint again), the leases it has carry on, and it waits, empty or
  // not, until it is uncordoned, released, reclaimed or retired. The
  // collector reclaims none of it; it still checks it. (drain and undrain:
  // the old names of cordon and uncordon, which processes of the release
  // before still append; decision 0036.)
  maintenance: {
    next: ['active', 'quarantined', 'released', 'broken'],
    accepts: [
      'acquire',
      'release_slot',
      'count_slots',
      'clean_slot',
      'release',
      'reclaim',
      'retire',
      'uncordon',
      'undrain',
      'check',
      'destroy_orphan',
    ],
    tone: 'quiet',
  },
  // A check found it unhealthy: like maintenance, no new lease lands on it
  // and its leases carry on, until an operator repairs it (a check that
  // finds it healthy puts it back) or releases it. A later healthy check
  // alone does not: somebody should look at what went wrong.
  quarantined: {
    next: ['active', 'released', 'broken'],
    accepts: ['acquire', 'release_slot', 'count_slots', 'clean_slot', 'release', 'reclaim', 'retire', 'repair', 'check', 'destroy_orphan'],
    tone: 'bad',
  },
  released: { next: ['destroyed', 'broken'], accepts: ['destroy', 'acquire', 'release_slot', 'count_slots'], tone: 'quiet' },
  broken: { next: ['destroyed'], accepts: ['destroy', 'acquire', 'release_slot', 'release'], tone: 'bad' },
  destroyed: { next: [], accepts: ['acquire', 'release_slot'], tone: 'gone' },
} as const satisfies Record<string, StateSpec>;

const blueprintCommands = [
  'need_resource',
  'slot_freed',
  'resource_destroyed',
  'serve_waiters',
  'reservation_due',
  'update_settings',
  'cordon',
  'uncordon',
  'drain',
  'undrain',
  // What its driver holds outside any resource is removed whether or not it takes leases.
  'destroy_orphan',
] as const;
const blueprint = {
  // A disabled blueprint makes no new resources, so it is not topped up.
  enabled: { next: ['disabled', 'archived'], accepts: [...blueprintCommands, 'top_up'], takesLeases: true, tone: 'good' },
  disabled: { next: ['enabled', 'archived'], accepts: blueprintCommands, tone: 'quiet' },
  // Done with, once nothing of it is live: kept for its history (its
  // leases, resources and timeline still name it), out of every list that
  // shows live objects, and never used again (setBlueprintState).
  archived: { next: [], accepts: [], tone: 'gone' },
} as const satisfies Record<string, StateSpec>;

export const LIFECYCLES = { lease, resource, blueprint } as const;

export type LeaseState = keyof typeof lease;
export type ResourceState = keyof typeof resource;
export type BlueprintState = keyof typeof blueprint;
export type StateOf<K extends ObjectKind> = keyof (typeof LIFECYCLES)[K];

/** The state a new object starts in. */
export const INITIAL_STATE = { lease: 'pending', resource: 'pending', blueprint: 'enabled' } as const satisfies {
  [K in ObjectKind]: StateOf<K>;
};

/** The state setting up ends in, the object then usable: where an object in an isSettingUp state is heading. */
export const READY_STATE = { lease: 'active', resource: 'active', blueprint: 'enabled' } as const satisfies {
  [K in ObjectKind]: StateOf<K>;
};

function spec(kind: ObjectKind, state: string): StateSpec {
  const states: Record<string, StateSpec> = LIFECYCLES[kind];
  const found = states[state];
  if (!found) throw new Error(`unknown ${kind} state "${state}"`);
  return found;
}

export function accepts(kind: ObjectKind, state: string, commandKind: string): boolean {
  return spec(kind, state).accepts.includes(commandKind);
}

/** Whether `state` of `kind` has `flag` (see StateSpec); false for every state of a kind that never sets it. */
export function hasFlag(kind: ObjectKind, state: string, flag: StateFlag): boolean {
  return spec(kind, state)[flag] === true;
}

/** Still being set up: heading for READY_STATE with no request needed (see StateSpec). */
export function isSettingUp(kind: ObjectKind, state: string): boolean {
  return hasFlag(kind, state, 'isSettingUp');
}

/** A lease in this state holds a slot of its resource; nothing of another kind does. */
export function holdsSlot(kind: ObjectKind, state: string): boolean {
  return hasFlag(kind, state, 'holdsSlot');
}

/** A blueprint in this state takes new leases. */
export function takesLeases(kind: ObjectKind, state: string): boolean {
  return hasFlag(kind, state, 'takesLeases');
}

/** A resource in this state grants its free slots (serves acquires, offers freed slots to the line); nothing of another kind does. */
export function grantsSlots(kind: ObjectKind, state: string): boolean {
  return hasFlag(kind, state, 'grantsSlots');
}

/** How a state reads to a person (the colour of its badge). */
export function toneOf(kind: ObjectKind, state: string): StateTone {
  return spec(kind, state).tone;
}

export function canTransition(kind: ObjectKind, from: string, to: string): boolean {
  return spec(kind, from).next.includes(to);
}

/** The states an object of `kind` may still leave: all but the final ones (no next state), which lists leave out unless asked. */
export function liveStates(kind: ObjectKind): string[] {
  return Object.entries(LIFECYCLES[kind] as Record<string, StateSpec>)
    .filter(([, s]) => s.next.length > 0)
    .map(([name]) => name);
}

/** The states of one kind that have a flag (for a statement that checks a state where it reads it). */
export function statesWith(kind: ObjectKind, flag: StateFlag): string[] {
  return Object.keys(LIFECYCLES[kind]).filter((state) => hasFlag(kind, state, flag));
}

/** The states of one kind that accept a command kind (for error messages and UIs). */
export function statesAccepting(kind: ObjectKind, commandKind: string): string[] {
  return Object.entries(LIFECYCLES[kind] as Record<string, StateSpec>)
    .filter(([, s]) => s.accepts.includes(commandKind))
    .map(([name]) => name);
}
