/**
 * An explanation of why a lease waits, or why a request would
 * (src/drain/explainLease.ts makes it; docs/scheduling.md, "Why is my lease
 * waiting?"): per blueprint that could serve it, whether its decision grants
 * it now, and every reason it does not, each with the smallest change found
 * that would.
 */

/** What keeps a lease from a slot at a blueprint. */
export const REASON_KINDS = {
  disabled: 'the blueprint is disabled: it makes no resources',
  resources: 'a resource in maintenance or quarantine takes no new lease',
  capacity: 'the blueprint is at its limit, with no free slot',
  quota: 'a quota of its team or holder is reached',
  selector: 'no free slot, and no resource the blueprint may make, matches its selector',
  chosenInstead: 'the room went to other leases first (fair share, priority)',
  priority: 'its priority: the lowest that would have it served, or preempt for it',
  preemption: 'a slot is being taken back for it',
  slotFrees: 'when a slot frees by itself (an expiry, the hold limit)',
} as const;
export type ReasonKind = keyof typeof REASON_KINDS;

export interface Reason {
  readonly kind: ReasonKind;
  readonly says: string;
  /** The smallest change found that would grant the lease now, or why none is needed or known. */
  readonly change: string | null;
}

export interface AtBlueprint {
  readonly blueprint: string;
  readonly grantedNow: boolean;
  /** Where the decision sends it, when it is granted now. */
  readonly where: string | null;
  readonly reasons: Reason[];
}

export interface Explanation {
  /** Null for a request not made (a dry run). */
  readonly lease: number | null;
  readonly state: string;
  readonly grantedNow: boolean;
  /** The blueprint the request goes to (for a lease: its own). */
  readonly goesTo: string | null;
  readonly summary: string;
  readonly blueprints: AtBlueprint[];
}
