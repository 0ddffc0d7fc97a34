import { describeZodIssues } from '../domain/errors.ts';
import { timeDriverCall } from '../metrics/metrics.ts';
import type { z } from 'zod';
import {
  type CheckAnswer,
  CheckResultSchema,
  type Driver,
  type DriverResult,
  DriverResultSchema,
  type ListAnswer,
  ListResultSchema,
  PermanentDriverError,
  type SlotListAnswer,
  SlotListResultSchema,
} from './Driver.ts';

/**
 * Wraps a driver so that whatever it returns is checked against
 * DriverResultSchema (or its operation's own schema): output Slipway cannot understand is a permanent
 * failure with a message naming what was wrong, never stored as-is.
 * `beforeCall` runs before each call goes out (the drain uses it to mark the
 * command running only when a driver is really called). Every call is
 * timed and counted under `driverName` (src/metrics).
 */
export function validatingDriver(driver: Driver, beforeCall: () => Promise<void> = async () => {}, driverName = 'unnamed'): Driver {
  const check =
    <A, T>(operation: keyof Driver, schema: z.ZodType<T>, call: (arg: A) => Promise<unknown>) =>
    async (arg: A): Promise<T> => {
      await beforeCall();
      // Timed and counted with its check: output Slipway cannot understand counts as a permanent failure.
      return timeDriverCall(
        driverName,
        operation,
        async () => {
          const result = schema.safeParse((await call(arg)) ?? {});
          if (!result.success) {
            throw new PermanentDriverError(`${operation} returned invalid output: ${describeZodIssues(result.error.issues)}`);
          }
          return result.data;
        },
        driverOutcome,
      );
    };
  const step = <A>(operation: keyof Driver, call: (arg: A) => Promise<DriverResult>) => check<A, DriverResult>(operation, DriverResultSchema, call);
  const { checkResource, cleanSlot, listResources, destroyOrphan, listSlots } = driver;
  return {
    allocateResource: step('allocateResource', (a) => driver.allocateResource(a)),
    activateResource: step('activateResource', (a) => driver.activateResource(a)),
    destroyResource: step('destroyResource', (a) => driver.destroyResource(a)),
    acquireLease: step('acquireLease', (a) => driver.acquireLease(a)),
    activateLease: step('activateLease', (a) => driver.activateLease(a)),
    releaseLease: step('releaseLease', (a) => driver.releaseLease(a)),
    ...(cleanSlot ? { cleanSlot: step<Parameters<typeof cleanSlot>[0]>('cleanSlot', (a) => cleanSlot.call(driver, a)) } : {}),
    ...(destroyOrphan ? { destroyOrphan: step<Parameters<typeof destroyOrphan>[0]>('destroyOrphan', (a) => destroyOrphan.call(driver, a)) } : {}),
    ...(listResources
      ? {
          listResources: check<Parameters<typeof listResources>[0], ListAnswer>('listResources', ListResultSchema, (a) =>
            listResources.call(driver, a),
          ),
        }
      : {}),
    ...(listSlots
      ? {
          listSlots: check<Parameters<typeof listSlots>[0], SlotListAnswer>('listSlots', SlotListResultSchema, (a) => listSlots.call(driver, a)),
        }
      : {}),
    ...(checkResource
      ? {
          checkResource: check<Parameters<typeof checkResource>[0], CheckAnswer>('checkResource', CheckResultSchema, (a) =>
            checkResource.call(driver, a),
          ),
        }
      : {}),
  };
}

/** How a failed call counts: the drain retries anything but a PermanentDriverError (see drain/driverFailure.ts). */
const driverOutcome = (error: unknown) => (error instanceof PermanentDriverError ? 'permanent' : 'transient');
