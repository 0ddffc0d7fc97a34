import type { TaskList } from 'graphile-worker';
import { z } from 'zod';
import type { CallbackDelivery } from './CallbackDelivery.ts';

const DeliverPayload = z.object({ id: z.number().int().positive() });

/**
 * The graphile-worker task that delivers one callback: one attempt per job.
 * Its jobs are queued by the SQL function slipway_dispatch_callbacks
 * (src/db/functions/slipway_dispatch_callbacks.ts), which names this task.
 */
export function callbackTasks(delivery: CallbackDelivery): TaskList {
  return {
    deliver_callback: async (payload) => {
      const { id } = DeliverPayload.parse(payload);
      await delivery.deliver(id);
    },
  };
}
