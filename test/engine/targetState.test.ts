import { expect, test } from 'vitest';
import { targetState } from '../../src/read/targetState.ts';

test.each([
  ['lease', 'active', [], undefined],
  ['lease', 'active', ['renew'], undefined],
  ['lease', 'active', ['release'], 'destroyed'],
  ['lease', 'released', ['destroy'], 'destroyed'],
  ['lease', 'pending', [], 'active'],
  ['lease', 'acquired', ['renew'], 'active'],
  ['lease', 'acquired', ['activate', 'release', 'renew'], 'destroyed'],
  ['lease', 'pending', ['allocate', 'release'], 'destroyed'],
  ['lease', 'destroyed', [], undefined],
  ['resource', 'active', ['reclaim'], 'destroyed'],
  ['resource', 'pending', ['activate'], 'active'],
  ['resource', 'pending', [], 'active'],
  ['resource', 'released', [], undefined],
  ['resource', 'active', ['acquire', 'release_slot'], undefined],
  // A kind this build does not know (queued by a newer release) has no goal here.
  ['resource', 'active', ['reclaim', 'some_newer_kind'], 'destroyed'],
  ['blueprint', 'enabled', ['top_up'], undefined],
] as const)('a %s that is %s with %j in flight is heading for %s', (kind, state, queue, goal) => {
  expect(
    targetState(
      kind,
      state,
      queue.map((k) => ({ kind: k })),
    ),
  ).toBe(goal);
});
