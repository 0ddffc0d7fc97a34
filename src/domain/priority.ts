import { z } from 'zod';

/**
 * A lease's priority: 0 (the default) to 9. A blueprint serves its line by
 * each lease's place, its request time less `priority × priority_step_ms`
 * (the blueprint's setting): a lease of priority 5 at a blueprint with a
 * 1-minute step goes ahead of lower-priority leases that have waited less
 * than 5 minutes more than it, and behind the others. So urgency counts,
 * and no lease starves: once a lease has waited 9 steps, no later request
 * goes ahead of it. The place is fixed when the lease joins the line, so the
 * line stays one static order its index reads (docs/scheduling.md).
 */
export const PRIORITY_RANGE = { min: 0, max: 9 } as const;

export const PrioritySchema = z
  .number()
  .int()
  .min(PRIORITY_RANGE.min, `expected a priority of ${PRIORITY_RANGE.min} to ${PRIORITY_RANGE.max}`)
  .max(PRIORITY_RANGE.max, `expected a priority of ${PRIORITY_RANGE.min} to ${PRIORITY_RANGE.max}`);

/** Where a lease requested at `requestedAt` with `priority` joins a line whose step is `stepMs`. */
export function placeInLine(requestedAt: Date, priority: number, stepMs: number): Date {
  return new Date(requestedAt.getTime() - priority * stepMs);
}

/** A blueprint's priority step in words, as its CLI view and web page give it. */
export function describePriorityStep(stepMs: number): string {
  return stepMs === 0 ? 'off: the line is served in request order' : `each level of a lease's priority counts as ${stepMs / 1000} s of waiting`;
}
