import { expect, test } from 'vitest';
import { targetState } from '../../src/read/targetState.ts';

test.each([
  ['lease', 'active', [], undefined],
  ['lease', 'active', ['renew'], undefined],
  ['lease', 'active', ['release'], 'destroyed'],
  ['lease', 'released', ['destroy'], 'destroyed'],
  ['lease', 'pending', [], 'active'],
  ['lease', 'pending', ['allocate', 'release'], 'destroyed'],
  ['lease', 'destroyed', [], undefined],
  ['resource', 'active', ['reclaim'], 'destroyed'],
  ['resource', 'pending', ['activate'], 'active'],
  ['blueprint', 'enabled', ['top_up'], undefined],
] as const)('a %s that is %s with %j in flight is heading for %s', (kind, state, queue, goal) => {
  expect(targetState(kind, state, queue.map((k) => ({ kind: k })))).toBe(goal);
});
