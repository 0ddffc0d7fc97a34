import type { TaskList } from 'graphile-worker';
import { z } from 'zod';
import type { ObjectKind } from '../migrations/schema.ts';
import type { DrainBatcher } from '../src/drain/DrainBatcher.ts';
import { DRAIN_TASK } from '../src/queue/objectTables.ts';

const DrainPayload = z.object({ id: z.number().int().positive() });

/**
 * The graphile-worker tasks: one per kind of object, each draining the queue
 * of the object named in its payload. A job only says "look at object N";
 * everything it does comes from the commands in that object's queue.
 */
export function drainTasks(drain: Pick<DrainBatcher, 'drain'>): TaskList {
  const task = (kind: ObjectKind) => async (payload: unknown) => {
    const { id } = DrainPayload.parse(payload);
    await drain.drain(kind, id);
  };
  return {
    [DRAIN_TASK.lease]: task('lease'),
    [DRAIN_TASK.resource]: task('resource'),
    [DRAIN_TASK.blueprint]: task('blueprint'),
  };
}
