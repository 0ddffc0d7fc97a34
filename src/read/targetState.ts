import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import { goalOf } from '../domain/commandKinds.ts';
import { isSettingUp, READY_STATE } from '../domain/lifecycle.ts';

/**
 * The state an object is heading for, given its queue (its queued and
 * running commands, oldest first), or undefined when it is where it is
 * going to stay: the "target state" shown while commands are in flight.
 * Each command kind's goal is in src/domain/commandKinds.ts; kinds without
 * one (renew, grant, messages between objects) leave the goal as it was.
 * The latest command with a goal wins: a release queued after an activation
 * is what will happen. With none, an object still setting up (the state
 * table's isSettingUp: a lease waiting for capacity has no command in
 * flight) is heading for its kind's ready state.
 */
export function targetState(kind: ObjectKind, state: string, queue: readonly Pick<CommandRow, 'kind'>[]): string | undefined {
  const fromQueue = queue
    .map((command) => goalOf(kind, command.kind))
    .filter((goal) => goal !== undefined)
    .at(-1);
  const goal = fromQueue ?? (isSettingUp(kind, state) ? READY_STATE[kind] : undefined);
  return goal === state ? undefined : goal;
}
