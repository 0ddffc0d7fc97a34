import { duePassStep } from './dueWork.ts';
import type { GcPass, StepReport } from './GcPass.ts';

/**
 * The observe loop: a reconciler does not trust what it made once, it looks
 * again. For each blueprint with a check interval, each resource that can
 * be checked and was last checked longer ago than the interval (or never)
 * is asked to `check`; its own drain calls the driver and decides (a check
 * is a command like any other, so it is ordered with the resource's grants
 * and releases, and one resource is checked by one worker at a time).
 * Longest unchecked first; a resource with a check on its way is left alone.
 *
 * Every worker's timekeeper asks for each check within a second of its due
 * time (src/worker/Timekeeper.ts); a pass does the same under the same lock
 * (appendDueWork), so by hand (`gc run`) it asks for every check due.
 *
 * A healthy resource checked every few seconds must not leave a command row
 * per check: before asking again, the earlier unchanged checks go
 * (forgetUnchangedChecks in dueTimes.ts).
 */
export async function checkResources(pass: GcPass): Promise<StepReport> {
  return duePassStep(pass, 'checks');
}
