import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';

/**
 * Where each requested command takes an object once it and what it causes
 * have run: the "target state" shown while it is in flight. Commands not
 * named here (renew, grant, messages between objects) leave the goal as it
 * was.
 */
const GOALS: Readonly<Record<ObjectKind, Readonly<Record<string, string>>>> = {
  lease: { allocate: 'active', activate: 'active', release: 'destroyed', destroy: 'destroyed' },
  resource: { allocate: 'active', activate: 'active', release: 'destroyed', reclaim: 'destroyed', retire: 'destroyed', destroy: 'destroyed' },
  blueprint: {},
};

/** States an object only passes through on its way to `active`: a lease waiting for capacity has no command in flight, yet a goal. */
const SETTING_UP: Readonly<Record<ObjectKind, readonly string[]>> = {
  lease: ['pending', 'acquired'],
  resource: ['pending'],
  blueprint: [],
};

/**
 * The state an object is heading for, given its queue (its queued and
 * running commands, oldest first), or undefined when it is where it is
 * going to stay. The latest command with a goal wins: a release queued
 * after an activation is what will happen.
 */
export function targetState(kind: ObjectKind, state: string, queue: readonly Pick<CommandRow, 'kind'>[]): string | undefined {
  const goals = GOALS[kind];
  const fromQueue = queue.map((command) => goals[command.kind]).filter((goal) => goal !== undefined).at(-1);
  const goal = fromQueue ?? (SETTING_UP[kind].includes(state) ? 'active' : undefined);
  return goal === state ? undefined : goal;
}
