import { z } from 'zod';
import { TeamNameSchema } from './team.ts';

/**
 * Quotas (docs/scheduling.md): at most `maxLeases` leases of a team, or of
 * one holder in it, counted at once, at one blueprint or overall. A lease
 * counts from the moment its blueprint sends it to a resource until the
 * resource has its slot back (src/db/countedLeases.ts). A request
 * over a quota waits in line, and is served when the count drops below it;
 * lowering a quota never ends a lease, it only stops new ones.
 */
export interface Quota {
  readonly team: string;
  /** null: every holder of the team. */
  readonly holder: string | null;
  /** null: overall, at every blueprint. */
  readonly blueprintId: number | null;
  readonly maxLeases: number;
}

/** Leases counted, by team, holder and blueprint. */
export interface Counted {
  readonly team: string;
  readonly holder: string;
  readonly blueprintId: number;
  readonly n: number;
}

/** Whether a quota covers a lease of `team` and `holder` at `blueprintId`. */
export function covers(q: Quota, team: string, holder: string, blueprintId: number): boolean {
  return q.team === team && (q.holder === null || q.holder === holder) && (q.blueprintId === null || q.blueprintId === blueprintId);
}

/** How many of the counted leases a quota counts. */
export function countFor(q: Quota, counted: readonly Counted[]): number {
  let n = 0;
  for (const c of counted) if (covers(q, c.team, c.holder, c.blueprintId)) n += c.n;
  return n;
}

/**
 * A quota that a new lease of `team` and `holder` at `blueprintId` would
 * exceed, with its count; undefined if none. `counted` answers the leases
 * counted for a quota (a blueprint's own count, or the overall one).
 */
export function quotaReached(
  quotas: readonly Quota[],
  counted: (quota: Quota) => readonly Counted[],
  lease: { team: string; holder: string; blueprintId: number },
): { quota: Quota; count: number } | undefined {
  for (const quota of quotas) {
    if (!covers(quota, lease.team, lease.holder, lease.blueprintId)) continue;
    const count = countFor(quota, counted(quota));
    if (count >= quota.maxLeases) return { quota, count };
  }
  return undefined;
}

/** A quota in words: "team ci's quota of 3 leases at sandboxes", "holder bot of team ci's quota of 1 lease overall". */
export function describeQuota(q: Quota, blueprintName: (id: number) => string): string {
  const whose = q.holder === null ? `team ${q.team}'s` : `holder ${q.holder} of team ${q.team}'s`;
  return `${whose} quota of ${q.maxLeases} lease${q.maxLeases === 1 ? '' : 's'} ${whereOf(q, blueprintName)}`;
}

/** Where a quota applies, in words: "team ci at sandboxes", "holder bot of team ci overall". */
export function describeScope(q: Omit<Quota, 'maxLeases'>, blueprintName: (id: number) => string): string {
  return `${q.holder === null ? `team ${q.team}` : `holder ${q.holder} of team ${q.team}`} ${whereOf(q, blueprintName)}`;
}

const whereOf = (q: Pick<Quota, 'blueprintId'>, blueprintName: (id: number) => string) =>
  q.blueprintId === null ? 'overall' : `at ${blueprintName(q.blueprintId)}`;

/** Where a quota applies: a team's every holder or one of them, at one blueprint or overall. */
export const QuotaScopeSchema = z
  .object({
    team: TeamNameSchema,
    /** One holder of the team (as leases name it, e.g. `token:ci-bot`); left out: the whole team. */
    holder: z.string().min(1).max(200).optional(),
    /** A blueprint's name or id; left out: overall, at every blueprint. */
    blueprint: z.union([z.string().min(1).max(63), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)]).optional(),
  })
  .strict();
export type QuotaScope = z.input<typeof QuotaScopeSchema>;

export const QuotaInputSchema = QuotaScopeSchema.extend({
  maxLeases: z.number().int().min(0, 'expected 0 (no new leases) or more').max(100000, 'expected at most 100000'),
}).strict();
export type QuotaInput = z.input<typeof QuotaInputSchema>;
