import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { DriverRegistry } from '../drivers/registry.ts';
import { validatingDriver } from '../drivers/validatingDriver.ts';
import { dispositionOf, driverCall } from './commandDisposition.ts';
import { type BatchRead, batchReadOf, type HandlerContext } from './Handler.ts';
import type { Held, ObjectRow, Planned } from './laneTypes.ts';
import type { RunningMarks } from './runningMarks.ts';

/** What a lane lends the contexts of the commands it plans: its drivers, and the Kysely through which effects query. */
export interface PlanningParts {
  readonly drivers: DriverRegistry;
  /** The pool's, never the lane's connection: a call in flight may outlive its step. */
  readonly db: Db;
}

/** What the state table and payload say of the held object's head command, and its handler's context. */
export function planHead(parts: PlanningParts, held: Held, marks: RunningMarks): Planned {
  const disposition = dispositionOf(held.ref, held.object.state, held.head);
  if (disposition.as === 'unknown') return { held, handOff: disposition.note };
  if (disposition.as === 'settled') return { held, outcome: disposition.outcome };
  return { held, handler: disposition.handler, ctx: commandContext(parts, held, held.object, held.head, disposition.payload, marks) };
}

/** A handler's context for `command` on the held object, its row as `object` (the head's, or as the run before left it). */
export function commandContext(
  parts: PlanningParts,
  held: Held,
  object: ObjectRow,
  command: CommandRow,
  payload: unknown,
  marks: RunningMarks,
): HandlerContext<ObjectKind> {
  const { ref, blueprint } = held;
  const { drivers } = parts;
  return {
    object,
    command,
    payload,
    blueprint,
    read: undefined,
    queued: held.following,
    db: parts.db,
    driver: () => validatingDriver(drivers.forBlueprint(blueprint), async () => marks.called(command.id), blueprint.driver),
    call: driverCall(ref, command, blueprint),
  };
}

/** Each declared read (BatchRead) made once for the step, with every key its objects need, into their contexts. */
export async function readDeclared(db: Db, planned: readonly Planned[]): Promise<void> {
  const byRead = new Map<BatchRead<unknown>, Planned[]>();
  for (const p of planned) {
    const read = batchReadOf(p.handler);
    if (!read || p.outcome) continue;
    byRead.set(read, [...(byRead.get(read) ?? []), p]);
  }
  for (const [read, users] of byRead) {
    const keys = [...new Set(users.map((p) => read.key(p.ctx!)).filter((k): k is number => k !== undefined))];
    const found = keys.length > 0 ? await read.load(db, keys) : new Map<number, unknown>();
    for (const p of users) {
      const key = read.key(p.ctx!);
      (p.ctx as { read: unknown }).read = key === undefined ? undefined : found.get(key);
    }
  }
}
