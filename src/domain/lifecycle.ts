import type { ObjectKind } from '../../migrations/schema.ts';

/**
 * THE state table. For each kind of object: its states, the states each may
 * move to, and the command kinds each state accepts (those whose handler
 * runs; any other command drained in that state settles as a no-op). The
 * drain checks every transition against it; every caller that appends a
 * command checks the target's state against it first, so an impossible
 * request is refused before it is queued.
 */
export interface StateSpec {
  readonly next: readonly string[];
  readonly accepts: readonly string[];
}

const lease = {
  pending: { next: ['acquired', 'released', 'broken'], accepts: ['allocate', 'grant', 'deny', 'release', 'renew'] },
  acquired: { next: ['active', 'released', 'broken'], accepts: ['activate', 'grant', 'deny', 'release', 'renew'] },
  active: { next: ['released', 'broken'], accepts: ['grant', 'deny', 'release', 'renew'] },
  released: { next: ['destroyed'], accepts: ['destroy', 'grant', 'deny'] },
  broken: { next: ['destroyed'], accepts: ['destroy', 'grant', 'deny', 'release'] },
  destroyed: { next: [], accepts: ['grant', 'deny'] },
} as const satisfies Record<string, StateSpec>;

const resource = {
  pending: {
    next: ['active', 'released', 'broken'],
    accepts: ['allocate', 'activate', 'acquire', 'release_slot', 'release', 'retire'],
  },
  active: { next: ['released', 'broken'], accepts: ['acquire', 'release_slot', 'release', 'reclaim', 'retire'] },
  released: { next: ['destroyed', 'broken'], accepts: ['destroy', 'acquire', 'release_slot'] },
  broken: { next: ['destroyed'], accepts: ['destroy', 'acquire', 'release_slot', 'release'] },
  destroyed: { next: [], accepts: ['acquire', 'release_slot'] },
} as const satisfies Record<string, StateSpec>;

const blueprintCommands = ['need_resource', 'slot_freed', 'resource_destroyed', 'serve_waiters', 'update_settings'] as const;
const blueprint = {
  // A disabled blueprint makes no new resources, so it is not topped up.
  enabled: { next: ['disabled'], accepts: [...blueprintCommands, 'top_up'] },
  disabled: { next: ['enabled'], accepts: blueprintCommands },
} as const satisfies Record<string, StateSpec>;

export const LIFECYCLES = { lease, resource, blueprint } as const;

export type LeaseState = keyof typeof lease;
export type ResourceState = keyof typeof resource;
export type BlueprintState = keyof typeof blueprint;
export type StateOf<K extends ObjectKind> = keyof (typeof LIFECYCLES)[K];

/** The state a new object starts in. */
export const INITIAL_STATE = { lease: 'pending', resource: 'pending', blueprint: 'enabled' } as const;

function spec(kind: ObjectKind, state: string): StateSpec {
  const states: Record<string, StateSpec> = LIFECYCLES[kind];
  const found = states[state];
  if (!found) throw new Error(`unknown ${kind} state "${state}"`);
  return found;
}

export function accepts(kind: ObjectKind, state: string, commandKind: string): boolean {
  return spec(kind, state).accepts.includes(commandKind);
}

export function canTransition(kind: ObjectKind, from: string, to: string): boolean {
  return spec(kind, from).next.includes(to);
}

/** The states of one kind that accept a command kind (for error messages and UIs). */
export function statesAccepting(kind: ObjectKind, commandKind: string): string[] {
  return Object.entries(LIFECYCLES[kind] as Record<string, StateSpec>)
    .filter(([, s]) => s.accepts.includes(commandKind))
    .map(([name]) => name);
}
