import { describe, expect, test } from 'vitest';
import { parseSelector } from '../../src/domain/labels.ts';
import { chooseVictim, PreemptionSettingsSchema, type VictimCandidate } from '../../src/domain/preemption.ts';

/** The victim order of decision 0043, over data: priority, then the team furthest above its share, then the shortest run. */
const now = new Date('2026-12-07T12:00:00Z');
const minutesAgo = (m: number) => new Date(now.getTime() - m * 60_000);
const settings = PreemptionSettingsSchema.parse({ priorityMargin: 2, minRuntimeMs: 5 * 60_000, graceMs: 60_000 });
const lease = (leaseId: number, team: string, priority: number, ranMinutes: number, labels: Record<string, string> = {}): VictimCandidate => ({
  leaseId,
  team,
  priority,
  grantedAt: minutesAgo(ranMinutes),
  resourceId: 100 + leaseId,
  labels,
});
const standings: Record<string, { held: number; share: number }> = { qa: { held: 3, share: 2 }, ci: { held: 1, share: 2 } };
const standing = (team: string) => standings[team] ?? { held: 0, share: 1 };

describe('chooseVictim', () => {
  test('the lowest priority first, whatever the teams and runs', () => {
    const choice = chooseVictim({ leaseId: 1, team: 'ci', priority: 9 }, [lease(2, 'qa', 3, 60), lease(3, 'ci', 1, 10)], settings, standing, now);
    expect(choice.victim?.leaseId).toBe(3);
  });

  test('at one priority, the team furthest above its fair share, then the shortest run; the reason says all three', () => {
    const candidates = [lease(2, 'ci', 0, 10), lease(3, 'qa', 0, 60), lease(4, 'qa', 0, 20)];
    const choice = chooseVictim({ leaseId: 42, team: 'ci', priority: 9 }, candidates, settings, standing, now);
    expect(choice.victim?.leaseId).toBe(4);
    expect(choice).toMatchObject({ reason: 'preempted for lease 42: priority 9 against 0; team qa at 3 of its share of 2; ran 20m' });
  });

  test('never below the margin, never a slot the selector does not match; one that has not run its minimum comes due later', () => {
    const preemptor = { leaseId: 1, team: 'ci', priority: 5, selector: parseSelector('gpu=a100') };
    const candidates = [lease(2, 'qa', 4, 60, { gpu: 'a100' }), lease(3, 'qa', 0, 60, { gpu: 'h100' }), lease(4, 'qa', 0, 2, { gpu: 'a100' })];
    const choice = chooseVictim(preemptor, candidates, settings, standing, now);
    expect(choice).toEqual({ victim: undefined, eligibleAt: new Date(minutesAgo(2).getTime() + 5 * 60_000) });
    expect(chooseVictim(preemptor, candidates.slice(0, 2), settings, standing, now)).toEqual({ victim: undefined, eligibleAt: undefined });
  });
});
