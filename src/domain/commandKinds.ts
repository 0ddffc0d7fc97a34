import { z } from 'zod';
import type { ObjectKind } from '../../migrations/schema.ts';

/**
 * Every command kind each object accepts, as data:
 *
 *   versions     payload schema per version (a newer worker keeps reading old
 *                versions; an older one leaves newer ones queued)
 *   upgrades     per version below the latest, how its payload becomes the
 *                next version's: handlers see the latest shape only
 *   internal     appended only by Slipway itself (drains, creation); callers
 *                outside may not append it
 *   dedupKey     at most one command with this key queued or running per
 *                object; a second append returns the first (coalesced)
 *   preempts     drained ahead of older queued work (once due: a preempting
 *                command that yielded still waits out its own backoff)
 *   supersedes   queued kinds this one makes pointless: cancelled when it runs
 */
export interface CommandKindSpec {
  readonly versions: Readonly<Record<number, z.ZodType>>;
  readonly upgrades?: Readonly<Record<number, (payload: never) => unknown>>;
  readonly internal: boolean;
  readonly dedupKey?: string;
  readonly preempts?: boolean;
  readonly supersedes?: readonly string[];
  readonly summary: string;
}

const id = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const none = z.object({}).strict();
const leaseRef = z.object({ leaseId: id }).strict();
const resourceRef = z.object({ resourceId: id }).strict();
const term = z.number().int().positive().max(366 * 24 * 3600 * 1000);
/** As a lease's own heartbeat interval (createLease): 1 s to a day. */
const heartbeat = z.number().int().min(1000).max(24 * 3600 * 1000);

const leaseKinds = {
  allocate: { versions: { 1: none }, internal: true, summary: 'find this pending lease a slot' },
  grant: {
    versions: { 1: z.object({ resourceId: id, slot: z.number().int().min(0) }).strict() },
    internal: true,
    summary: 'a resource granted this lease a slot',
  },
  deny: {
    versions: { 1: z.object({ resourceId: id.optional(), reason: z.string().max(500) }).strict() },
    internal: true,
    summary: 'a resource refused this lease a slot',
  },
  activate: { versions: { 1: none }, internal: true, summary: 'make an acquired lease usable' },
  release: {
    // ifExpired: the collector's expiry release, applied only if the lease is
    // still past a deadline then (see the lease's release handler). An
    // optional field, so every v1 payload before it still reads; a worker
    // from before it fails such a release as invalid, and the next
    // collector pass asks again.
    versions: { 1: z.object({ ifExpired: z.literal(true).optional() }).strict() },
    internal: false,
    dedupKey: 'release',
    preempts: true,
    supersedes: ['allocate', 'activate', 'deny'],
    summary: 'give the lease up',
  },
  destroy: { versions: { 1: none }, internal: true, dedupKey: 'destroy', summary: 'finish a released or broken lease' },
  renew: {
    versions: {
      1: z.object({ expiresInMs: term.optional() }).strict(),
      // v2 may also set a new heartbeat interval: a holder that learns it
      // needs longer between beats says so as it beats.
      2: z.object({ expiresInMs: term.optional(), heartbeatMs: heartbeat.optional() }).strict(),
    },
    // A v1 renewal is a v2 one that keeps the heartbeat interval.
    upgrades: { 1: (v1: { expiresInMs?: number }) => v1 },
    internal: false,
    // Ordered with release (both preempt, so among them by id): a renewal
    // queued before the collector's expiry release is applied before it and
    // the release then finds the lease renewed; one queued after finds the
    // lease released. Preempting also keeps a heartbeat from waiting behind
    // an activation that is backing off.
    preempts: true,
    summary: "push the lease's expiry and heartbeat deadline back",
  },
} as const satisfies Record<string, CommandKindSpec>;

const resourceKinds = {
  allocate: { versions: { 1: none }, internal: true, summary: 'create the resource' },
  activate: { versions: { 1: none }, internal: true, summary: 'make the resource usable' },
  acquire: { versions: { 1: leaseRef }, internal: true, summary: 'a lease asks for a slot' },
  release_slot: { versions: { 1: leaseRef }, internal: true, summary: 'a lease gives its slot back' },
  release: {
    versions: { 1: none },
    internal: false,
    dedupKey: 'release',
    preempts: true,
    supersedes: ['allocate', 'activate'],
    summary: 'release the resource and every lease on it, then destroy it',
  },
  reclaim: {
    versions: { 1: none },
    internal: false,
    dedupKey: 'reclaim',
    preempts: true,
    summary: 'release the resource if no lease holds it',
  },
  destroy: {
    versions: { 1: none },
    internal: true,
    dedupKey: 'destroy',
    summary: 'destroy a released or broken resource',
  },
  retire: {
    versions: { 1: none },
    internal: true,
    dedupKey: 'retire',
    summary: 'take no new leases; destroy the resource when its leases end',
  },
} as const satisfies Record<string, CommandKindSpec>;

const blueprintKinds = {
  need_resource: { versions: { 1: leaseRef }, internal: true, summary: 'a lease found no free slot' },
  slot_freed: { versions: { 1: resourceRef }, internal: true, summary: 'a resource has a free slot' },
  resource_destroyed: { versions: { 1: resourceRef }, internal: true, summary: 'a resource is gone' },
  serve_waiters: {
    versions: { 1: none },
    internal: true,
    dedupKey: 'serve_waiters',
    summary: 'the limits or state changed: serve the waiting leases from the room that made',
  },
  update_settings: {
    versions: { 1: z.object({ settings: z.record(z.string(), z.json()) }).strict() },
    internal: false,
    summary: "replace the driver settings and reconcile the blueprint's resources with them",
  },
  top_up: {
    versions: { 1: none },
    internal: false,
    dedupKey: 'top_up',
    summary: 'make resources until the warm minimum is active (within the limit)',
  },
} as const satisfies Record<string, CommandKindSpec>;

export const COMMAND_KINDS = { lease: leaseKinds, resource: resourceKinds, blueprint: blueprintKinds } as const;

export type CommandKindOf<K extends ObjectKind> = keyof (typeof COMMAND_KINDS)[K] & string;

export function commandKindSpec(target: ObjectKind, kind: string): CommandKindSpec | undefined {
  const kinds: Record<string, CommandKindSpec> = COMMAND_KINDS[target];
  return Object.hasOwn(kinds, kind) ? kinds[kind] : undefined;
}

function latestVersion(spec: CommandKindSpec): number {
  return Math.max(...Object.keys(spec.versions).map(Number));
}

/**
 * The version a command is stored at when its caller names none: the oldest
 * whose schema takes the payload, so workers of the release before can run
 * whatever does not need what is new (no flag day for callers); the latest
 * when none takes it (its schema then says what is wrong).
 */
export function versionFor(spec: CommandKindSpec, payload: unknown): number {
  const versions = Object.keys(spec.versions).map(Number).sort((a, b) => a - b);
  return versions.find((version) => spec.versions[version]!.safeParse(payload).success) ?? latestVersion(spec);
}

/** A payload read at `version`, upgraded step by step to the latest version's shape. */
export function upgradedPayload(spec: CommandKindSpec, version: number, payload: unknown): unknown {
  let upgraded = payload;
  for (let from = version; from < latestVersion(spec); from++) {
    const upgrade = spec.upgrades?.[from] as ((payload: unknown) => unknown) | undefined;
    if (!upgrade) throw new Error(`no upgrade from version ${from} of a command kind with versions ${Object.keys(spec.versions).join(', ')}`);
    upgraded = spec.versions[from + 1]!.parse(upgrade(upgraded));
  }
  return upgraded;
}

/** Kinds drained ahead of the rest of an object's queue. */
export function preemptingKinds(target: ObjectKind): string[] {
  return Object.entries(COMMAND_KINDS[target] as Record<string, CommandKindSpec>)
    .filter(([, spec]) => spec.preempts)
    .map(([kind]) => kind);
}

/** What this build of Slipway can run: advertised by each worker. */
export function handledVersions(): Record<string, Record<string, number[]>> {
  return Object.fromEntries(
    Object.entries(COMMAND_KINDS).map(([target, kinds]) => [
      target,
      Object.fromEntries(
        Object.entries(kinds as Record<string, CommandKindSpec>).map(([kind, spec]) => [
          kind,
          Object.keys(spec.versions).map(Number),
        ]),
      ),
    ]),
  );
}
