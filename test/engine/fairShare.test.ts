import { expect, test } from 'vitest';
import {
  type Candidate,
  decayUse,
  describeChoice,
  levelOf,
  perHeld,
  pickNext,
  recentSlots,
  shareOf,
  type TeamUse,
} from '../../src/domain/fairShare.ts';
import { type Counted, countFor, describeQuota, type Quota, quotaReached } from '../../src/domain/quotas.ts';

// The choice among the teams' first waiters, and the quotas' arithmetic,
// without a database (the waiting line's tests run them on one).
const NOW = Date.parse('2030-01-01T12:00:00Z');
const STEP = 60_000;
const at = (secondsAgo: number) => new Date(NOW - secondsAgo * 1000);
/** A waiter of `team` that asked `secondsAgo` with `priority`: its place is its request less priority × step. */
const waiter = (leaseId: number, team: string, secondsAgo: number, priority = 0): Candidate => ({
  leaseId,
  team,
  requestedAt: at(secondsAgo),
  since: new Date(at(secondsAgo).getTime() - priority * STEP),
  priority,
});
/** Teams by [weight, use now, slots held lately]; a slot held now adds `held` (as perHeld says). */
const uses = (entries: Record<string, [weight: number, use: number, recent?: number]>, held = 0.001): Map<string, TeamUse> =>
  new Map(Object.entries(entries).map(([team, [weight, use, recent = 0]]) => [team, { weight, use, recent, perHeld: held }]));
const HOUR = 3_600_000;

test("a lease's level is its priority plus the steps it has waited; with the step off every lease is level 0", () => {
  expect(levelOf(waiter(1, 'a', 0, 5), NOW, STEP)).toBe(5);
  expect(levelOf(waiter(1, 'a', 150, 2), NOW, STEP)).toBe(4);
  expect(levelOf(waiter(1, 'a', 150, 9), NOW, 0)).toBe(0);
});

test('the highest level wins whatever the teams hold', () => {
  const teams = uses({ busy: [1, 10], idle: [1, 0] });
  expect(pickNext([waiter(1, 'idle', 0, 2), waiter(2, 'busy', 0, 3)], teams, NOW, STEP)?.leaseId).toBe(2);
  // Aging: two steps waited lift a priority 1 past a fresh priority 2.
  expect(pickNext([waiter(1, 'idle', 0, 2), waiter(2, 'busy', 180, 1)], teams, NOW, STEP)?.leaseId).toBe(2);
});

test('among equal levels the team of least load against its weight once served wins, then the earlier place', () => {
  // With no history: ci holds 4 with weight 2 (5 per 2 once served), web 3 with weight 1 (4 once served): ci is further below its share.
  const teams = uses({ ci: [2, 4], web: [1, 3] });
  expect(pickNext([waiter(1, 'web', 50), waiter(2, 'ci', 10)], teams, NOW, STEP)?.leaseId).toBe(2);
  // Equal loads once served (5 per 2, 2.5 per 1): the place decides, then the id.
  const even = uses({ ci: [2, 4], web: [1, 1.5] });
  expect(pickNext([waiter(1, 'web', 10), waiter(2, 'ci', 50)], even, NOW, STEP)?.leaseId).toBe(2);
  expect(pickNext([waiter(3, 'web', 10), waiter(2, 'ci', 10)], even, NOW, STEP)?.leaseId).toBe(2);
  expect(pickNext([], even, NOW, STEP)).toBeUndefined();
});

test('among equal levels what a team held lately decides, with what its slots held now will likely add', () => {
  // web held 1 slot lately for its weight 1, ci 2.4 for its weight 3 (0.8 each): ci is further below its share, though it holds more now.
  const teams = uses({ ci: [3, 3, 2.4], web: [1, 0, 1] });
  expect(pickNext([waiter(1, 'web', 50), waiter(2, 'ci', 10)], teams, NOW, STEP)?.leaseId).toBe(2);
  // A mean hold that is a tenth of the mean life: ci's 3 slots now and the one it would get add 0.4 (2.8 for 3), web's one 0.1 (1.1 for 1).
  expect(pickNext([waiter(1, 'web', 50), waiter(2, 'ci', 10)], uses({ ci: [3, 3, 2.4], web: [1, 0, 1] }, 0.1), NOW, STEP)?.leaseId).toBe(2);
  // With a mean hold as long as the mean life, ci's slots held now weigh more: 6.4 for 3 against 2 for 1.
  expect(pickNext([waiter(1, 'web', 50), waiter(2, 'ci', 10)], uses({ ci: [3, 3, 2.4], web: [1, 0, 1] }, 1), NOW, STEP)?.leaseId).toBe(1);
});

test("what a slot held now adds is the blueprint's mean hold over the decay's mean life; a little with no grant yet", () => {
  // 2 grants of 3600 slot-seconds each, with a half-life of an hour (mean life 5194 s).
  expect(
    perHeld(
      [
        { slotSeconds: 5000, grants: 1.5 },
        { slotSeconds: 2200, grants: 0.5 },
      ],
      HOUR,
    ),
  ).toBeCloseTo(3600 / (3600 / Math.LN2), 9);
  expect(perHeld([{ slotSeconds: 0, grants: 0 }], HOUR)).toBe(0.001);
  expect(perHeld([], HOUR)).toBe(0.001);
});

test("a team's use decays with the half-life: a slot held for good comes to one slot held lately", () => {
  const none = { slotSeconds: 0, grants: 0 };
  // One slot held for one half-life: half of what holding it for good comes to.
  expect(recentSlots(decayUse(none, HOUR, HOUR, 1), HOUR)).toBeCloseTo(0.5, 9);
  expect(recentSlots(decayUse(none, 50 * HOUR, HOUR, 3), HOUR)).toBeCloseTo(3, 9);
  // Kept, and nothing held since: halved each half-life; grants too.
  expect(decayUse({ slotSeconds: 100, grants: 8 }, 2 * HOUR, HOUR, 0)).toEqual({ slotSeconds: 25, grants: 2 });
  // Counted in two stretches or one, the same.
  const once = decayUse(none, 90_000, HOUR, 2);
  const twice = decayUse(decayUse(none, 30_000, HOUR, 2), 60_000, HOUR, 2);
  expect(twice.slotSeconds).toBeCloseTo(once.slotSeconds, 9);
  // A clock read behind the last write counts no time.
  expect(decayUse({ slotSeconds: 10, grants: 1 }, -5, HOUR, 4)).toEqual({ slotSeconds: 10, grants: 1 });
});

test("a team's share is its weight's part of the competing teams' weights; the choice says why", () => {
  const teams = uses({ ci: [2, 2, 1.84], web: [1, 5], qa: [1, 0] });
  expect(shareOf(teams, 'ci', 12)).toBe(6);
  expect(shareOf(teams, 'web', 12)).toBe(3);
  expect(describeChoice(waiter(7, 'ci', 41, 5), teams, 12, NOW, HOUR)).toBe(
    "priority 5; team ci's share 6, held 1.8 lately (half-life 1h), holds 2 now; waited 41s",
  );
  expect(describeChoice(waiter(7, 'qa', 0), uses({ qa: [1, 0], web: [2, 1] }), 10, NOW, 90_000)).toBe(
    "priority 0; team qa's share 3.3, held 0 lately (half-life 1m30s), holds 0 now; waited 0ms",
  );
});

test('a quota counts the leases it covers, and is reached at its maximum', () => {
  const counted: Counted[] = [
    { team: 'ci', holder: 'token:bot', blueprintId: 1, n: 2 },
    { team: 'ci', holder: 'token:dev', blueprintId: 2, n: 1 },
    { team: 'web', holder: 'token:bot', blueprintId: 1, n: 5 },
  ];
  const teamAtOne: Quota = { team: 'ci', holder: null, blueprintId: 1, maxLeases: 3 };
  const teamOverall: Quota = { team: 'ci', holder: null, blueprintId: null, maxLeases: 3 };
  const botOverall: Quota = { team: 'ci', holder: 'token:bot', blueprintId: null, maxLeases: 2 };
  expect([countFor(teamAtOne, counted), countFor(teamOverall, counted), countFor(botOverall, counted)]).toEqual([2, 3, 2]);
  const all = () => counted;
  // At blueprint 1, the team has room (2 of 3) but the overall quota is reached (3 of 3).
  expect(quotaReached([teamAtOne], all, { team: 'ci', holder: 'token:dev', blueprintId: 1 })).toBeUndefined();
  expect(quotaReached([teamAtOne, teamOverall], all, { team: 'ci', holder: 'token:dev', blueprintId: 1 })).toEqual({ quota: teamOverall, count: 3 });
  // A holder's quota holds back only that holder, and only in its team.
  expect(quotaReached([botOverall], all, { team: 'ci', holder: 'token:bot', blueprintId: 2 })).toEqual({ quota: botOverall, count: 2 });
  expect(quotaReached([botOverall], all, { team: 'ci', holder: 'token:dev', blueprintId: 2 })).toBeUndefined();
  expect(quotaReached([botOverall], all, { team: 'web', holder: 'token:bot', blueprintId: 1 })).toBeUndefined();
  expect(describeQuota(teamAtOne, () => 'sandboxes')).toBe("team ci's quota of 3 leases at sandboxes");
  expect(describeQuota({ ...botOverall, maxLeases: 1 }, () => 'unused')).toBe("holder token:bot of team ci's quota of 1 lease overall");
});
