import { duePassStep } from './dueWork.ts';
import type { GcPass, StepReport } from './GcPass.ts';

/**
 * Issues a `release` for each live lease past its expiry time or heartbeat
 * deadline, or still setting up past its wait deadline, marked `ifExpired`
 * (see appendDueWork): the same work every worker's timekeeper does within
 * a second of each deadline (src/worker/Timekeeper.ts), under the same
 * lock, so a pass finds nothing here unless no worker runs, and `gc run` by
 * hand still ends every lease that is due. A batch at a time, for as long
 * as the pass has time.
 */
export async function expireLeases(pass: GcPass): Promise<StepReport> {
  return duePassStep(pass, 'leases');
}
