import { describe, expect, test } from 'vitest';
import {
  appendedKind,
  COMMAND_KINDS,
  type CommandKindSpec,
  commandKindSpec,
  goalOf,
  kindNamesOf,
  oldNamesOf,
  schemaOf,
  underWayWhile,
  upgradedPayload,
  versionFor,
} from '../../src/domain/commandKinds.ts';
import {
  accepts,
  canTransition,
  grantsSlots,
  holdsSlot,
  INITIAL_STATE,
  isSettingUp,
  LIFECYCLES,
  READY_STATE,
  type StateSpec,
  statesAccepting,
  takesLeases,
} from '../../src/domain/lifecycle.ts';
import { BLUEPRINT_HANDLERS } from '../../src/drain/handlers/blueprintHandlers.ts';
import { LEASE_HANDLERS } from '../../src/drain/handlers/leaseHandlers.ts';
import { RESOURCE_HANDLERS } from '../../src/drain/handlers/resourceHandlers.ts';

const kinds = ['lease', 'resource', 'blueprint'] as const;
const HANDLERS = { lease: LEASE_HANDLERS, resource: RESOURCE_HANDLERS, blueprint: BLUEPRINT_HANDLERS };

describe('the state table', () => {
  test.each(kinds)('%s: every transition and accepted command names something that exists', (kind) => {
    const states = LIFECYCLES[kind] as Record<string, { next: readonly string[]; accepts: readonly string[] }>;
    expect(Object.keys(states)).toContain(INITIAL_STATE[kind]);
    for (const [state, spec] of Object.entries(states)) {
      for (const next of spec.next) expect(Object.keys(states), `${kind} ${state} → ${next}`).toContain(next);
      for (const command of spec.accepts) expect(commandKindSpec(kind, command), `${kind} ${state} accepts ${command}`).toBeDefined();
    }
  });

  test.each(kinds)('%s: every command kind is accepted somewhere and has a handler and a schema', (kind) => {
    for (const command of Object.keys(COMMAND_KINDS[kind])) {
      expect(statesAccepting(kind, command).length, `${kind} ${command}`).toBeGreaterThan(0);
      expect(Object.keys(HANDLERS[kind]), `${kind} handler for ${command}`).toContain(command);
      // Versions 1..N, and a way up from each to the next, so a newer worker reads every older command.
      const spec = commandKindSpec(kind, command)!;
      expect(spec.versions.length, `${kind} ${command} versions`).toBeGreaterThanOrEqual(1);
      expect(Object.keys(spec.upgrades ?? {}).map(Number), `${kind} ${command} upgrades`).toEqual(spec.versions.slice(1).map((_, i) => i + 1));
    }
  });

  test.each(kinds)('%s: every kind a command kind names (supersedes, underWayWhile) is one of the same object', (kind) => {
    for (const [command, spec] of Object.entries(COMMAND_KINDS[kind])) {
      const named = [...(('supersedes' in spec && spec.supersedes) || []), ...underWayWhile(kind, command)];
      for (const other of named) expect(commandKindSpec(kind, other), `${kind} ${command} names ${other}`).toBeDefined();
    }
  });

  test.each(kinds)(
    '%s: an old name (renamedTo) is its new kind under another name: same spec, states and handler, appended as the new one',
    (kind) => {
      for (const [old, spec] of Object.entries(COMMAND_KINDS[kind] as Record<string, CommandKindSpec>)) {
        if (!spec.renamedTo) continue;
        const current = commandKindSpec(kind, spec.renamedTo)!;
        const { renamedTo, deprecatedSince, summary, ...rest } = spec;
        expect(current.renamedTo, `${kind} ${renamedTo} is no old name itself`).toBeUndefined();
        expect(rest, `${kind} ${old}`).toEqual(Object.fromEntries(Object.entries(current).filter(([field]) => field !== 'summary')));
        expect(Number.isNaN(Date.parse(deprecatedSince!)), `${kind} ${old} deprecatedSince`).toBe(false);
        expect(statesAccepting(kind, old), `${kind} ${old}`).toEqual(statesAccepting(kind, renamedTo));
        // The same decision (a blueprint's handlers are each wrapped in their own serving of the line); test/api/cordon.test.ts runs both.
        const handler = (name: string) => (HANDLERS[kind] as Record<string, { shape: string } | undefined>)[name];
        expect(handler(old)?.shape, `${kind} ${old} handler`).toBe(handler(renamedTo)!.shape);
        expect(appendedKind(kind, old)).toBe(renamedTo);
        expect(oldNamesOf(kind, renamedTo)).toContain(old);
      }
      expect(appendedKind(kind, 'release')).toBe('release');
    },
  );

  test('drain and undrain are the old names of cordon and uncordon, on resources and blueprints', () => {
    for (const kind of ['resource', 'blueprint'] as const) {
      expect(oldNamesOf(kind, 'cordon')).toEqual(['drain']);
      expect(oldNamesOf(kind, 'uncordon')).toEqual(['undrain']);
    }
    expect(oldNamesOf('resource', 'release')).toEqual([]);
    expect(kindNamesOf('resource').old).toEqual({ drain: 'cordon', undrain: 'uncordon' });
    expect(kindNamesOf('blueprint').current).toEqual(expect.arrayContaining(['cordon', 'uncordon']));
    expect(kindNamesOf('blueprint').current).not.toContain('drain');
    expect(kindNamesOf('lease').old).toEqual({});
  });

  test('what releasing, reclaiming and setting up lead to, and what keeps a request under way', () => {
    expect(goalOf('lease', 'release')).toBe('destroyed');
    expect(goalOf('lease', 'activate')).toBe('active');
    expect(goalOf('lease', 'renew')).toBeUndefined();
    expect(goalOf('resource', 'reclaim')).toBe('destroyed');
    expect(goalOf('resource', 'acquire')).toBeUndefined();
    expect(goalOf('lease', 'no_such_kind')).toBeUndefined();
    expect(underWayWhile('lease', 'release')).toEqual(['release', 'destroy']);
    expect(underWayWhile('resource', 'reclaim')).toEqual(['reclaim', 'destroy']);
    expect(underWayWhile('lease', 'renew')).toEqual(['renew']);
  });

  test('the designed lease and resource paths are allowed, and nothing else goes back', () => {
    const leasePath = ['pending', 'acquired', 'active', 'released', 'destroyed'];
    const resourcePath = ['pending', 'active', 'released', 'destroyed'];
    for (const [kind, path] of [
      ['lease', leasePath],
      ['resource', resourcePath],
    ] as const) {
      for (let i = 0; i + 1 < path.length; i++) expect(canTransition(kind, path[i]!, path[i + 1]!)).toBe(true);
      for (let i = 1; i < path.length; i++) expect(canTransition(kind, path[i]!, path[i - 1]!)).toBe(false);
      expect(canTransition(kind, 'broken', 'destroyed')).toBe(true);
      // Destroyed is the one state nothing leaves.
      const states = LIFECYCLES[kind] as Record<string, { next: readonly string[] }>;
      expect(Object.keys(states).filter((state) => states[state]!.next.length === 0)).toEqual(['destroyed']);
    }
  });

  test('release works in every lease state before destroyed except after it already happened', () => {
    expect(statesAccepting('lease', 'release').sort()).toEqual(['acquired', 'active', 'broken', 'pending']);
    expect(accepts('lease', 'destroyed', 'release')).toBe(false);
    expect(accepts('resource', 'active', 'reclaim')).toBe(true);
    expect(accepts('resource', 'pending', 'reclaim')).toBe(false);
  });

  test('a lease is renewed only while it is live and not yet released; the collector may top up only an enabled blueprint', () => {
    expect(statesAccepting('lease', 'renew').sort()).toEqual(['acquired', 'active', 'pending']);
    expect(statesAccepting('blueprint', 'top_up')).toEqual(['enabled']);
    // renew and release are ordered among themselves by when they were queued
    expect(commandKindSpec('lease', 'renew')).toMatchObject({ internal: false, preempts: true });
    expect(commandKindSpec('lease', 'release')).toMatchObject({ preempts: true });
    expect(commandKindSpec('blueprint', 'top_up')).toMatchObject({ internal: false, dedupKey: 'top_up' });
  });

  test.each(kinds)('%s: setting up starts with a new object and leads to the ready state, which is not setting up', (kind) => {
    const states = LIFECYCLES[kind] as Record<string, StateSpec>;
    expect(Object.keys(states)).toContain(READY_STATE[kind]);
    expect(isSettingUp(kind, READY_STATE[kind])).toBe(false);
    const settingUp = Object.keys(states).filter((state) => isSettingUp(kind, state));
    if (settingUp.length > 0) expect(settingUp).toContain(INITIAL_STATE[kind]);
    // Each setting-up state moves to the ready state, or to another setting-up state on the way.
    for (const state of settingUp) {
      expect(
        states[state]!.next.some((next) => next === READY_STATE[kind] || isSettingUp(kind, next)),
        `${kind} ${state}`,
      ).toBe(true);
    }
  });

  test('which states set up, hold a slot, take leases, grant slots', () => {
    const where = (kind: (typeof kinds)[number], test: (kind: (typeof kinds)[number], state: string) => boolean) =>
      Object.keys(LIFECYCLES[kind]).filter((state) => test(kind, state));
    expect(where('lease', isSettingUp)).toEqual(['pending', 'acquired']);
    expect(where('resource', isSettingUp)).toEqual(['pending']);
    expect(where('blueprint', isSettingUp)).toEqual([]);
    expect(where('lease', holdsSlot)).toEqual(['acquired', 'active']);
    expect(where('resource', holdsSlot)).toEqual([]);
    expect(where('blueprint', takesLeases)).toEqual(['enabled']);
    expect(where('resource', grantsSlots)).toEqual(['active']);
    expect(where('lease', grantsSlots)).toEqual([]);
    expect(where('blueprint', grantsSlots)).toEqual([]);
    // A resource that grants slots takes the acquires that ask for them.
    for (const state of where('resource', grantsSlots)) expect(accepts('resource', state, 'acquire')).toBe(true);
    // Only a state that may be released holds a slot, so releasing it can give the slot back.
    for (const state of where('lease', holdsSlot)) expect(accepts('lease', state, 'release')).toBe(true);
  });

  test('an unknown state is a programming error, not a silent "no"', () => {
    expect(() => accepts('lease', 'flying', 'release')).toThrow(/unknown lease state "flying"/);
    expect(() => holdsSlot('lease', 'flying')).toThrow(/unknown lease state "flying"/);
  });
});

test('a renewal is stored at the oldest version that carries it, and read by a newer worker in the latest shape', () => {
  const renew = commandKindSpec('lease', 'renew')!;
  expect(versionFor(renew, {})).toBe(1);
  expect(versionFor(renew, { expiresInMs: 60_000 })).toBe(1);
  expect(versionFor(renew, { heartbeatMs: 30_000 })).toBe(2);
  expect(versionFor(renew, { heartbeatOnly: true })).toBe(3);
  // A payload no version takes is the latest's, whose schema then says what is wrong.
  expect(versionFor(renew, { heartbeatMs: 10 })).toBe(3);
  expect(schemaOf(renew, 3)!.safeParse({ heartbeatOnly: true, expiresInMs: 60_000 }).success).toBe(false);
  expect(upgradedPayload(renew, 1, { expiresInMs: 60_000 })).toEqual({ expiresInMs: 60_000 });
  expect(upgradedPayload(renew, 2, { heartbeatMs: 30_000 })).toEqual({ heartbeatMs: 30_000 });
  expect(upgradedPayload(renew, 3, { heartbeatOnly: true })).toEqual({ heartbeatOnly: true });
});
