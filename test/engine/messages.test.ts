import { expect, test } from 'vitest';
import type { ObjectKind } from '../../migrations/schema.ts';
import { COMMAND_KINDS, commandKindSpec, versionFor } from '../../src/domain/commandKinds.ts';
import { type FollowUp, send } from '../../src/drain/messages.ts';
import { validatedAppend } from '../../src/queue/appendCommand.ts';

test('there is a sender for every command kind of every object kind, and for no other', () => {
  for (const target of Object.keys(COMMAND_KINDS) as ObjectKind[]) {
    expect(Object.keys(send[target]).sort()).toEqual(Object.keys(COMMAND_KINDS[target]).sort());
  }
});

test('a message is its target, kind, payload (if its kind carries one), reason and not-before time', () => {
  expect(send.lease.grant(7, { resourceId: 3, slot: 0 }, 'a slot')).toStrictEqual({
    target: { kind: 'lease', id: 7 },
    kind: 'grant',
    payload: { resourceId: 3, slot: 0 },
    reason: 'a slot',
  });
  expect(send.lease.allocate(7, 'refused', { notBeforeMs: 200 })).toStrictEqual({
    target: { kind: 'lease', id: 7 },
    kind: 'allocate',
    reason: 'refused',
    notBeforeMs: 200,
  });
  expect(send.resource.destroy(3, 'gone')).toStrictEqual({ target: { kind: 'resource', id: 3 }, kind: 'destroy', reason: 'gone' });
});

// The commit appends a follow-up at the oldest version whose schema takes its payload, as before messages were typed.
test('a message is appended at the oldest version that takes its payload', () => {
  const messages: FollowUp[] = [send.lease.release(7, {}, 'resource released'), send.lease.release(7, { ifExpired: true }, 'expired')];
  for (const m of messages) {
    const appended = validatedAppend({ ...m, actor: { issuedBy: 'test', source: 'system' } }, { fromOutside: false });
    expect(appended.version).toBe(versionFor(commandKindSpec(m.target.kind, m.kind)!, m.payload ?? {}));
    expect(appended.version).toBe(1);
  }
});

// Checked by `npm run typecheck`: each line below must fail to compile.
test('a wrong kind or payload does not compile', () => {
  const wrong = () => [
    // @ts-expect-error a lease has no acquire
    send.lease.acquire(1, { leaseId: 1 }, 'no such kind'),
    // @ts-expect-error grant's payload is a resource and a slot
    send.lease.grant(1, { leaseId: 1 }, 'wrong payload'),
    // @ts-expect-error a slot is a number
    send.lease.grant(1, { resourceId: 1, slot: '0' }, 'wrong field type'),
    // @ts-expect-error acquire carries the lease that asks
    send.resource.acquire(1, 'no payload'),
    // @ts-expect-error destroy carries nothing
    send.resource.destroy(1, { leaseId: 1 }, 'a payload for a kind that carries none'),
    // @ts-expect-error a follow-up written out is checked as well: a blueprint has no grant
    { target: { kind: 'blueprint', id: 1 }, kind: 'grant', payload: { resourceId: 1, slot: 0 }, reason: 'x' } satisfies FollowUp,
  ];
  expect(typeof wrong).toBe('function');
});
