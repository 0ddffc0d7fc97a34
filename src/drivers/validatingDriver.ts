import { describeZodIssues } from '../domain/errors.ts';
import { timeDriverCall } from '../metrics/metrics.ts';
import { type Driver, type DriverResult, DriverResultSchema, PermanentDriverError } from './Driver.ts';

/**
 * Wraps a driver so that whatever it returns is checked against
 * DriverResultSchema: output Slipway cannot understand is a permanent
 * failure with a message naming what was wrong, never stored as-is.
 * `beforeCall` runs before each call goes out (the drain uses it to mark the
 * command running only when a driver is really called). Every call is
 * timed and counted under `driverName` (src/metrics).
 */
export function validatingDriver(driver: Driver, beforeCall: () => Promise<void> = async () => {}, driverName = 'unnamed'): Driver {
  const check =
    <A>(operation: keyof Driver, call: (arg: A) => Promise<DriverResult>) =>
    async (arg: A): Promise<DriverResult> => {
      await beforeCall();
      // Timed and counted with its check: output Slipway cannot understand counts as a permanent failure.
      return timeDriverCall(
        driverName,
        operation,
        async () => {
          const result = DriverResultSchema.safeParse((await call(arg)) ?? {});
          if (!result.success) {
            throw new PermanentDriverError(`${operation} returned invalid output: ${describeZodIssues(result.error.issues)}`);
          }
          return result.data;
        },
        driverOutcome,
      );
    };
  return {
    allocateResource: check('allocateResource', (a) => driver.allocateResource(a)),
    activateResource: check('activateResource', (a) => driver.activateResource(a)),
    destroyResource: check('destroyResource', (a) => driver.destroyResource(a)),
    acquireLease: check('acquireLease', (a) => driver.acquireLease(a)),
    activateLease: check('activateLease', (a) => driver.activateLease(a)),
    releaseLease: check('releaseLease', (a) => driver.releaseLease(a)),
  };
}

/** How a failed call counts: the drain retries anything but a PermanentDriverError (see ObjectDrain). */
const driverOutcome = (error: unknown) => (error instanceof PermanentDriverError ? 'permanent' : 'transient');
