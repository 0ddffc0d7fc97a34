import { z } from 'zod';
import { EndingSchema, EndingWithdrawalSchema } from './ending.ts';
import type { ObjectKind } from '../../migrations/schema.ts';
import type { BlueprintState, LeaseState, ResourceState } from './lifecycle.ts';

/**
 * Every command kind each object accepts, as data:
 *
 *   versions     payload schema per version, from version 1 on (a newer worker
 *                keeps reading old versions; an older one leaves newer ones
 *                queued); a handler's payload is the last one's (PayloadOf)
 *   upgrades     per version below the latest, how its payload becomes the
 *                next version's: handlers see the latest shape only
 *   internal     appended only by Slipway itself (drains, creation); callers
 *                outside may not append it
 *   dedupKey     at most one command with this key queued or running per
 *                object; a second append returns the first (coalesced)
 *   preempts     drained ahead of older queued work (once due: a preempting
 *                command that yielded still waits out its own backoff)
 *   supersedes   queued kinds this one makes pointless: cancelled when it runs
 *   goal         the state it takes its object to, with what it causes: the
 *                object's "target state" while it is queued or running (none:
 *                it leaves the goal as it was, e.g. renew, or a message
 *                between objects)
 *   underWayWhile  the kinds, itself and those it leads to, any of which
 *                queued or running means a request of this kind is already
 *                under way (the web UI's button reads "releasing…" then);
 *                just itself when not given
 *   renamedTo    this is a kind's old name (see renamed): a request for it
 *                is appended as the kind it names
 *   deprecatedSince  with renamedTo: the day the old name was deprecated
 *                (the API's Deprecation header)
 */
export interface CommandKindSpec<State extends string = string> {
  readonly versions: readonly [z.ZodType, ...z.ZodType[]];
  readonly upgrades?: Readonly<Record<number, (payload: never) => unknown>>;
  readonly internal: boolean;
  readonly dedupKey?: string;
  readonly preempts?: boolean;
  readonly supersedes?: readonly string[];
  readonly goal?: State;
  readonly underWayWhile?: readonly string[];
  readonly renamedTo?: string;
  readonly deprecatedSince?: string;
  readonly summary: string;
}

/**
 * A kind's old name, kept as a deprecated alias: a caller's request for it
 * is appended as the new name (validatedAppend), and Slipway's own messages
 * use the new name, so no command of this release carries it. Workers still
 * advertise and run it, as the new kind, for the commands that processes of
 * the release before append while both run (docs/upgrades.md, "Cordon and
 * uncordon"): it goes in a later release, once none runs.
 */
function renamed<const Spec extends CommandKindSpec, const To extends string>(spec: Spec, to: To, deprecatedSince: string) {
  return { ...spec, renamedTo: to, deprecatedSince, summary: `deprecated name of ${to}, appended as ${to}` } as const;
}

const id = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const none = z.object({}).strict();
const leaseRef = z.object({ leaseId: id }).strict();
const resourceRef = z.object({ resourceId: id }).strict();
/** A moment of a reservation's window that its blueprint acts on (domain/reservations.ts). */
const reservationMoment = z.object({ reservationId: id, moment: z.enum(['start', 'hand_back', 'end']) }).strict();
/** An orphan as the collector records it: by the driver's id for it. */
const orphanRef = z.object({ orphan: z.string().min(1).max(1000) }).strict();
const term = z
  .number()
  .int()
  .positive()
  .max(366 * 24 * 3600 * 1000);
/** As a lease's own heartbeat interval (createLease): 1 s to a day. */
const heartbeat = z
  .number()
  .int()
  .min(1000)
  .max(24 * 3600 * 1000);

const leaseKinds = {
  allocate: { versions: [none], internal: true, goal: 'active', summary: 'ask the blueprint again for a slot, after a resource refused the lease' },
  grant: {
    versions: [z.object({ resourceId: id, slot: z.number().int().min(0) }).strict()],
    internal: true,
    goal: 'active',
    summary: 'a resource granted this lease a slot: acquire it and activate the lease',
  },
  deny: {
    versions: [z.object({ resourceId: id.optional(), reason: z.string().max(500) }).strict()],
    internal: true,
    summary: 'a resource refused this lease a slot',
  },
  activate: { versions: [none], internal: true, goal: 'active', summary: 'activate an acquired lease again, after its grant failed to' },
  release: {
    // ifExpired: the collector's expiry release, applied only if the lease is
    // still past a deadline then (see the lease's release handler). An
    // optional field, so every v1 payload before it still reads; a worker
    // from before it fails such a release as invalid, and the next
    // collector pass asks again.
    versions: [z.object({ ifExpired: z.literal(true).optional() }).strict()],
    internal: false,
    dedupKey: 'release',
    preempts: true,
    supersedes: ['allocate', 'activate', 'deny'],
    goal: 'destroyed',
    underWayWhile: ['release', 'destroy'],
    summary: 'give the lease up',
  },
  destroy: { versions: [none], internal: true, dedupKey: 'destroy', goal: 'destroyed', summary: 'finish a released or broken lease' },
  resource_gone: {
    versions: [z.object({ resourceId: id, reason: z.string().max(1000) }).strict()],
    internal: true,
    goal: 'destroyed',
    summary: "a check found the lease's resource gone: the lease is broken",
  },
  renew: {
    versions: [
      z.object({ expiresInMs: term.optional() }).strict(),
      // v2 may also set a new heartbeat interval: a holder that learns it
      // needs longer between beats says so as it beats.
      z.object({ expiresInMs: term.optional(), heartbeatMs: heartbeat.optional() }).strict(),
      // v3 may beat the heartbeat alone, leaving the expiry where it is: a
      // holder that beats while its work runs (withLease, `lease run`) must
      // not push back the limit its requester set.
      z
        .object({ expiresInMs: term.optional(), heartbeatMs: heartbeat.optional(), heartbeatOnly: z.literal(true).optional() })
        .strict()
        .refine((v) => !(v.heartbeatOnly && v.expiresInMs !== undefined), {
          message: 'heartbeatOnly leaves the expiry as it is: give it or expiresInMs, not both',
        }),
    ],
    // A v1 renewal is a v2 one that keeps the heartbeat interval; a v2 one is a v3 one that also renews the expiry.
    upgrades: { 1: (v1: { expiresInMs?: number }) => v1, 2: (v2: { expiresInMs?: number; heartbeatMs?: number }) => v2 },
    internal: false,
    // Ordered with release (both preempt, so among them by id): a renewal
    // queued before the collector's expiry release is applied before it and
    // the release then finds the lease renewed; one queued after finds the
    // lease released. Preempting also keeps a heartbeat from waiting behind
    // an activation that is backing off.
    preempts: true,
    summary: "push the lease's expiry and heartbeat deadline back",
  },
  notify_ending: {
    versions: [EndingSchema],
    internal: true,
    dedupKey: 'notify_ending',
    // Told at once, not behind a renewal or an activation backing off.
    preempts: true,
    summary: "tell the lease's holder by when Slipway will end it, and why (its blueprint's longest hold, or a preemption)",
  },
  withdraw_ending: {
    versions: [EndingWithdrawalSchema],
    internal: true,
    preempts: true,
    summary: "tell the lease's holder that an end it was told of is withdrawn (the lease it was preempted for went away)",
  },
} as const satisfies Record<string, CommandKindSpec<LeaseState>>;

/** When drain and undrain became cordon and uncordon (decision 0036). */
const CORDON_RENAMED = '2026-12-07';

// cordon and uncordon both preempt, so they are applied in the order they
// were asked (among preempting kinds, by id), and a cordon is applied ahead
// of the acquires already queued, which it then refuses.
const resourceCordon = {
  versions: [none],
  internal: false,
  dedupKey: 'cordon',
  preempts: true,
  goal: 'maintenance',
  summary: 'put the resource into maintenance: no new lease lands on it; its leases carry on',
} as const satisfies CommandKindSpec<ResourceState>;
const resourceUncordon = {
  versions: [none],
  internal: false,
  dedupKey: 'uncordon',
  preempts: true,
  goal: 'active',
  summary: 'take the resource out of maintenance: it takes leases again',
} as const satisfies CommandKindSpec<ResourceState>;

const resourceKinds = {
  allocate: { versions: [none], internal: true, goal: 'active', summary: 'create the resource' },
  activate: { versions: [none], internal: true, goal: 'active', summary: 'make the resource usable' },
  acquire: { versions: [leaseRef], internal: true, summary: 'a lease asks for a slot' },
  release_slot: {
    versions: [leaseRef],
    internal: true,
    summary: 'take a slot back from a lease (to clean it, on a blueprint that cleans between leases; or one its lease no longer wanted)',
  },
  // Not deduplicated: a count queued but already being decided may have
  // read the slots before the return that asks again committed.
  count_slots: {
    versions: [none],
    internal: true,
    summary: "a lease gave back what may have been the resource's last slot: count them (idle from then; destroyed if released and empty)",
  },
  clean_slot: {
    versions: [z.object({ slot: z.number().int().min(0) }).strict()],
    internal: true,
    summary: 'clean a slot a lease gave back before another lease may have it (blueprints that clean between leases)',
  },
  release: {
    versions: [none],
    internal: false,
    dedupKey: 'release',
    preempts: true,
    supersedes: ['allocate', 'activate'],
    goal: 'destroyed',
    underWayWhile: ['release', 'destroy'],
    summary: 'release the resource and every lease on it, then destroy it',
  },
  reclaim: {
    versions: [none],
    internal: false,
    dedupKey: 'reclaim',
    preempts: true,
    goal: 'destroyed',
    underWayWhile: ['reclaim', 'destroy'],
    summary: 'release the resource if no lease holds it',
  },
  destroy: {
    versions: [none],
    internal: true,
    dedupKey: 'destroy',
    goal: 'destroyed',
    summary: 'destroy a released or broken resource',
  },
  retire: {
    versions: [none],
    internal: false,
    dedupKey: 'retire',
    goal: 'destroyed',
    summary: 'take no new leases; destroy the resource when its leases end',
  },
  // Preempting: a check must not wait behind a backlog of slot traffic to
  // find a resource gone, and it refuses nothing the queue holds.
  check: {
    versions: [none],
    internal: false,
    dedupKey: 'check',
    preempts: true,
    summary: 'ask the driver whether the resource still exists and is healthy: unhealthy quarantines it, gone breaks it and its leases',
  },
  repair: {
    versions: [none],
    internal: false,
    dedupKey: 'repair',
    preempts: true,
    goal: 'active',
    summary: 'check a quarantined resource again: healthy, it takes leases again',
  },
  // Not internal, as the blueprint's: the collector asks for it from
  // outside; the slot must be one its last pass recorded as orphaned.
  destroy_orphan: {
    versions: [orphanRef],
    internal: false,
    summary: 'free, through the driver, a slot it listed on the resource that no lease holds (an orphaned slot the collector recorded)',
  },
  cordon: resourceCordon,
  uncordon: resourceUncordon,
  drain: renamed(resourceCordon, 'cordon', CORDON_RENAMED),
  undrain: renamed(resourceUncordon, 'uncordon', CORDON_RENAMED),
} as const satisfies Record<string, CommandKindSpec<ResourceState>>;

const blueprintCordon = {
  versions: [none],
  internal: false,
  dedupKey: 'cordon',
  summary: 'cordon every active resource of the blueprint (it still makes new ones: disable it to stop that)',
} as const satisfies CommandKindSpec<BlueprintState>;
const blueprintUncordon = {
  versions: [none],
  internal: false,
  dedupKey: 'uncordon',
  summary: 'uncordon every resource of the blueprint in maintenance',
} as const satisfies CommandKindSpec<BlueprintState>;

const blueprintKinds = {
  need_resource: {
    versions: [leaseRef],
    internal: true,
    summary: 'a lease wants a slot: it joins the waiting line, served at once if there is room',
  },
  slot_freed: { versions: [resourceRef], internal: true, summary: 'a resource has a free slot' },
  resource_destroyed: { versions: [resourceRef], internal: true, summary: 'a resource is gone' },
  serve_waiters: {
    versions: [none],
    internal: true,
    dedupKey: 'serve_waiters',
    summary: 'the limits or state changed: serve the waiting leases from the room that made',
  },
  reservation_due: {
    versions: [reservationMoment],
    internal: true,
    summary:
      "a reservation's window opened (slots are reclaimed for it if need be) or ended, or the time to hand its unused slots back came (queued for then when it was made)",
  },
  update_settings: {
    versions: [z.object({ settings: z.record(z.string(), z.json()) }).strict()],
    internal: false,
    summary: "replace the driver settings and reconcile the blueprint's resources with them",
  },
  top_up: {
    versions: [none],
    internal: false,
    dedupKey: 'top_up',
    summary: 'make resources until the warm minimum is active (within the limit)',
  },
  cordon: blueprintCordon,
  uncordon: blueprintUncordon,
  drain: renamed(blueprintCordon, 'cordon', CORDON_RENAMED),
  undrain: renamed(blueprintUncordon, 'uncordon', CORDON_RENAMED),
  // Not internal: the collector asks for it from outside, as it asks for
  // every command; the orphan must be one its last pass recorded.
  destroy_orphan: {
    versions: [orphanRef],
    internal: false,
    summary: 'remove, through the driver, something it listed that no resource stands for (an orphan the collector recorded)',
  },
} as const satisfies Record<string, CommandKindSpec<BlueprintState>>;

export const COMMAND_KINDS = { lease: leaseKinds, resource: resourceKinds, blueprint: blueprintKinds } as const;

export type CommandKindOf<K extends ObjectKind> = keyof (typeof COMMAND_KINDS)[K] & string;

/**
 * The payload a handler of `C` on a `K` gets: the output of its latest
 * version's schema (older versions arrive upgraded, see upgradedPayload), so
 * a handler never casts its payload.
 */
export type PayloadOf<K extends ObjectKind, C extends CommandKindOf<K>> = (typeof COMMAND_KINDS)[K][C] extends {
  readonly versions: readonly [...unknown[], infer Latest extends z.ZodType];
}
  ? z.output<Latest>
  : never;

/**
 * The payload a sender of `C` to a `K` gives (a follow-up, see
 * drain/messages.ts): the input of its latest version's schema. The append
 * stores it at the oldest version whose schema takes it (versionFor), so a
 * sender writes the latest shape and older workers still run what they can.
 */
export type PayloadInputOf<K extends ObjectKind, C extends CommandKindOf<K>> = (typeof COMMAND_KINDS)[K][C] extends {
  readonly versions: readonly [...unknown[], infer Latest extends z.ZodType];
}
  ? z.input<Latest>
  : never;

/** Whether `C` on a `K` supersedes no queued kind (only such a kind's handler may join runs, see drain/Handler.ts). */
export type SupersedesNothing<K extends ObjectKind, C extends CommandKindOf<K>> = (typeof COMMAND_KINDS)[K][C] extends {
  readonly supersedes: readonly [unknown, ...unknown[]];
}
  ? false
  : true;

export function commandKindSpec(target: ObjectKind, kind: string): CommandKindSpec | undefined {
  const kinds: Record<string, CommandKindSpec> = COMMAND_KINDS[target];
  return Object.hasOwn(kinds, kind) ? kinds[kind] : undefined;
}

/** The kind a request for `kind` is appended as: the new name if `kind` is an old one (see renamed), else `kind` itself. */
export function appendedKind(target: ObjectKind, kind: string): string {
  return commandKindSpec(target, kind)?.renamedTo ?? kind;
}

/** A target's kind names (see renamed): those kinds have now, and each old name with the kind it is appended as. */
export interface KindNames {
  readonly current: readonly string[];
  readonly old: Readonly<Record<string, string>>;
}

/** The names of `target`'s kinds, current and old: what an old name is, said once for the API, the CLI and the web UI. */
export function kindNamesOf(target: ObjectKind): KindNames {
  const kinds = Object.entries(COMMAND_KINDS[target] as Record<string, CommandKindSpec>);
  return {
    current: kinds.filter(([, spec]) => spec.renamedTo === undefined).map(([kind]) => kind),
    old: Object.fromEntries(kinds.flatMap(([kind, spec]) => (spec.renamedTo === undefined ? [] : [[kind, spec.renamedTo]]))),
  };
}

/** The old names of `kind` (see renamed): the kinds appended as it. */
export function oldNamesOf(target: ObjectKind, kind: string): string[] {
  return Object.entries(kindNamesOf(target).old)
    .filter(([, to]) => to === kind)
    .map(([old]) => old);
}

/** The payload schema of `version` (counted from 1), if this build has it. */
export function schemaOf(spec: CommandKindSpec, version: number): z.ZodType | undefined {
  return Number.isInteger(version) && version >= 1 ? spec.versions[version - 1] : undefined;
}

/** The versions this build has of a kind: 1 to the latest. */
export function versionsOf(spec: CommandKindSpec): number[] {
  return spec.versions.map((_, i) => i + 1);
}

function latestVersion(spec: CommandKindSpec): number {
  return spec.versions.length;
}

/**
 * The version a command is stored at when its caller names none: the oldest
 * whose schema takes the payload, so workers of the release before can run
 * whatever does not need what is new (no flag day for callers); the latest
 * when none takes it (its schema then says what is wrong).
 */
export function versionFor(spec: CommandKindSpec, payload: unknown): number {
  return versionsOf(spec).find((version) => schemaOf(spec, version)!.safeParse(payload).success) ?? latestVersion(spec);
}

/** A payload read at `version`, upgraded step by step to the latest version's shape. */
export function upgradedPayload(spec: CommandKindSpec, version: number, payload: unknown): unknown {
  let upgraded = payload;
  for (let from = version; from < latestVersion(spec); from++) {
    const upgrade = spec.upgrades?.[from] as ((payload: unknown) => unknown) | undefined;
    if (!upgrade) throw new Error(`no upgrade from version ${from} of a command kind with versions ${versionsOf(spec).join(', ')}`);
    upgraded = schemaOf(spec, from + 1)!.parse(upgrade(upgraded));
  }
  return upgraded;
}

/** The state a command of `kind` takes its object to (see CommandKindSpec.goal), if it has one. */
export function goalOf(target: ObjectKind, kind: string): string | undefined {
  return commandKindSpec(target, kind)?.goal;
}

/** The kinds any of which in flight means a request of `kind` is already under way (see CommandKindSpec.underWayWhile). */
export function underWayWhile(target: ObjectKind, kind: string): readonly string[] {
  return commandKindSpec(target, kind)?.underWayWhile ?? [kind];
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
      Object.fromEntries(Object.entries(kinds as Record<string, CommandKindSpec>).map(([kind, spec]) => [kind, versionsOf(spec)])),
    ]),
  );
}
