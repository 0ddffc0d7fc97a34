import type { BlueprintRow, CommandRow, ObjectKind } from '../../migrations/schema.ts';
import { commandKindSpec, preemptingKinds, schemaOf, upgradedPayload } from '../domain/commandKinds.ts';
import { describeZodIssues } from '../domain/errors.ts';
import { accepts } from '../domain/lifecycle.ts';
import { type DriverCall, driverBlueprint } from '../drivers/Driver.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import type { CommandHandler, Outcome } from './Handler.ts';
import { BLUEPRINT_HANDLERS } from './handlers/blueprintHandlers.ts';
import { LEASE_HANDLERS } from './handlers/leaseHandlers.ts';
import { RESOURCE_HANDLERS } from './handlers/resourceHandlers.ts';

// Each table is checked against its own object kind where it is defined;
// here they are looked up by the kind of the object being drained.
const HANDLERS = {
  lease: LEASE_HANDLERS,
  resource: RESOURCE_HANDLERS,
  blueprint: BLUEPRINT_HANDLERS,
} as unknown as Record<ObjectKind, Readonly<Record<string, CommandHandler<ObjectKind> | undefined>>>;

/** The command kinds that go ahead of older work in their object's queue, as "<object kind>.<command kind>" (see sql/runs.ts). */
export const PREEMPTING: readonly string[] = (['lease', 'resource', 'blueprint'] as const).flatMap((kind) =>
  preemptingKinds(kind).map((command) => `${kind}.${command}`),
);

/**
 * A command's disposition: what a drain does with it, as far as the state
 * table and the payload tell, before any handler runs (not to be confused
 * with a lane's step, the round in which it decides its objects):
 * - `unknown`: this worker has no such kind or version (a newer Slipway
 *   wrote it); it is handed to a worker that knows it;
 * - `settled`: the outcome is already known (an invalid payload fails; a
 *   state that does not accept the kind makes it a no-op);
 * - `handle`: the handler decides, with the validated payload.
 */
export type CommandDisposition =
  | { readonly as: 'unknown'; readonly note: string }
  | { readonly as: 'settled'; readonly outcome: Outcome }
  | { readonly as: 'handle'; readonly handler: CommandHandler<ObjectKind>; readonly payload: unknown };

export function dispositionOf(target: ObjectRef, state: string, command: CommandRow): CommandDisposition {
  const spec = commandKindSpec(target.kind, command.kind);
  const schema = spec && schemaOf(spec, command.version);
  if (!spec || !schema) {
    return { as: 'unknown', note: `waiting for a worker that handles ${target.kind} ${command.kind} v${command.version}` };
  }
  const payload = schema.safeParse(command.payload);
  if (!payload.success) {
    return { as: 'settled', outcome: { status: 'failed', message: `invalid payload: ${describeZodIssues(payload.error.issues, 'payload')}` } };
  }
  const handler = handlerOf(target.kind, command.kind);
  if (!accepts(target.kind, state, command.kind) || !handler) {
    return { as: 'settled', outcome: { status: 'done', message: `nothing to do: ${target.kind} ${target.id} is ${state}` } };
  }
  return { as: 'handle', handler, payload: upgradedPayload(spec, command.version, payload.data) };
}

/** The handler of a command kind on a kind of object, whatever the object's state. */
export function handlerOf(target: ObjectKind, kind: string): CommandHandler<ObjectKind> | undefined {
  return HANDLERS[target][kind];
}

/** Who a handler's driver calls are for: the blueprint, and the object and command ids as the idempotency key. */
export function driverCall(target: ObjectRef, command: CommandRow, blueprint: BlueprintRow): DriverCall {
  return {
    blueprint: driverBlueprint(blueprint),
    idempotencyKey: `${target.kind}:${target.id}:${command.id}`,
    commandId: command.id,
  };
}
