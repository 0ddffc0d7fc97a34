import { z } from 'zod';
import type { BlueprintRow, CallbackAttemptRow, CallbackRow, CommandRow, OrphanRow } from '../../migrations/schema.ts';
import { LIFECYCLES } from '../domain/lifecycle.ts';
import { OrphansSettingSchema } from '../domain/orphans.ts';
import { PreemptionSettingsSchema, preemptionOf } from '../domain/preemption.ts';
import { ENDING_KINDS, ENDINGS, endingOf } from '../domain/ending.ts';
import { resourceLabels } from '../domain/labels.ts';
import { REASON_KINDS, type ReasonKind } from '../domain/explanation.ts';
import type { BlueprintDetail, ListedBlueprint } from '../read/blueprints.ts';
import type { CallbackView } from '../read/callbacks.ts';
import type { CommandTreeNode } from '../read/commandTree.ts';
import type { LeaseView } from '../read/leases.ts';
import type { LineStanding } from '../read/standingText.ts';
import type { ObjectHistory, TimelineEntry } from '../read/objectHistory.ts';
import type { Page } from '../read/page.ts';
import type { TokenView } from './auth/tokens.ts';
import type { TeamDetail, TeamView } from '../read/teams.ts';
import type { ResourceDetail, ResourceView } from '../read/resources.ts';
import type { ReservationView } from '../read/reservations.ts';
import { RESERVATION_STATES } from '../domain/reservations.ts';

/**
 * What the API says about each object: its public shape (camelCase, times as
 * ISO 8601 text), the zod schema the API serializes it with and the typed
 * client parses it with, and the one function that makes it from its
 * database row. Rows stay snake_case inside Slipway; this file is the
 * boundary, written out field by field rather than by a key transform so
 * that what callers wrote (attributes, payloads, settings, event data)
 * passes through untouched.
 *
 * The same shapes are the CLI's `--json` output (local and remote alike)
 * and the callbacks' bodies.
 */

/** A moment, as `Date.prototype.toISOString` writes it. */
export const Timestamp = z.iso.datetime().meta({ description: 'ISO 8601, UTC, to the millisecond' });
const OptionalTimestamp = Timestamp.nullable();
const Id = z.number().int().positive();
/** JSON a caller or a driver wrote, passed through as it is. */
const JsonObject = z.record(z.string(), z.unknown());
/** Labels: text keys to text values. */
const Labels = z.record(z.string(), z.string());

/**
 * A state, as text: the states listed are today's (src/domain/lifecycle.ts),
 * but a newer worker of a rolling upgrade may write one this server does not
 * know yet, and reading that object must not fail.
 */
const stateOf = (kind: keyof typeof LIFECYCLES) =>
  z.string().meta({ description: `the ${kind}'s state: ${Object.keys(LIFECYCLES[kind]).join(', ')}` });

export const ObjectKindSchema = z.enum(['lease', 'resource', 'blueprint']);
export const CommandStatusSchema = z.enum(['queued', 'running', 'done', 'failed', 'cancelled', 'coalesced']);
export const CommandSourceSchema = z.enum(['web', 'cli', 'api', 'gc', 'system']);

const iso = (at: Date): string => at.toISOString();
const isoOrNull = (at: Date | null): string | null => (at === null ? null : at.toISOString());

// --- blueprints ---------------------------------------------------------------

export const BlueprintSchema = z
  .object({
    id: Id,
    name: z.string(),
    driver: z.string(),
    settings: JsonObject,
    maxResources: z.number().int(),
    leasesPerResource: z.number().int(),
    state: stateOf('blueprint'),
    liveResources: z.number().int().meta({ description: 'resources not yet destroyed' }),
    minResources: z.number().int().meta({ description: 'the warm minimum the collector keeps ready' }),
    idleTimeoutMs: z.number().int().nullable(),
    checkIntervalMs: z.number().int().nullable().meta({ description: 'how often each resource is checked by its driver (null: never)' }),
    cleanBetweenLeases: z.boolean().meta({ description: 'each slot a lease gives back is cleaned by the driver before another lease may have it' }),
    cleanAttempts: z.number().int().meta({ description: 'failed cleanings in a row that quarantine a resource' }),
    priorityStepMs: z.number().int().meta({ description: "how much waiting one level of a lease's priority is worth in the line" }),
    maxHoldMs: z
      .number()
      .int()
      .nullable()
      .meta({ description: 'the longest a lease may be held, from its grant to its end, renewals included (null: no limit)' }),
    fairShareHalfLifeMs: z.number().int().meta({
      description: 'how fast what a team used at the blueprint is forgotten, for fair share: a slot-second weighs half as much this much later',
    }),
    preemption: PreemptionSettingsSchema.nullable().meta({
      description: 'how it takes slots back from active leases for waiting leases of higher priority (null: it never does)',
    }),
    labels: Labels.meta({ description: 'labels every resource of it carries (over those its driver reports), which lease selectors match' }),
    orphans: OrphansSettingSchema.meta({
      description: 'what the collector does with what its driver lists that no resource stands for: report it, or destroy it through the driver',
    }),
    version: z.number().int(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: 'Blueprint', description: 'a named, configured pool of resources' });
export type Blueprint = z.infer<typeof BlueprintSchema>;

export function blueprintOf(row: BlueprintRow): Blueprint {
  return {
    id: row.id,
    name: row.name,
    driver: row.driver,
    settings: row.settings as Record<string, unknown>,
    maxResources: row.max_resources,
    leasesPerResource: row.leases_per_resource,
    state: row.state,
    liveResources: row.live_resources,
    minResources: row.min_resources,
    idleTimeoutMs: row.idle_timeout_ms,
    checkIntervalMs: row.check_interval_ms,
    cleanBetweenLeases: row.clean_between_leases,
    cleanAttempts: row.clean_attempts,
    priorityStepMs: row.priority_step_ms,
    maxHoldMs: row.max_hold_ms,
    fairShareHalfLifeMs: row.fair_share_half_life_ms,
    preemption: preemptionOf(row.preemption),
    labels: row.labels as Record<string, string>,
    orphans: row.orphans,
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export const OrphanSchema = z
  .object({
    id: z.string().meta({ description: "the driver's own id for it (a path, an entry's name, a cloud id)" }),
    resourceId: z.number().int().nullable().meta({
      description: 'the resource it was made for, as the driver reported it (none such is live); for an orphaned slot, the live resource it is on',
    }),
    slot: z.number().int().nullable().meta({
      description: 'set for an orphaned slot: the slot of the resource that the driver holds and no lease does (freed through the resource)',
    }),
    attributes: JsonObject.meta({ description: 'as the driver listed them' }),
    firstSeenAt: Timestamp.meta({ description: 'the first collector pass of the run of passes that found it unmatched' }),
    lastSeenAt: Timestamp,
    passes: z.number().int().meta({ description: 'collector passes in a row that found it unmatched (a destroy waits for 2)' }),
  })
  .meta({
    id: 'Orphan',
    description: "something the blueprint's driver lists that no resource stands for, or a slot on a live resource that no lease holds",
  });
export type Orphan = z.infer<typeof OrphanSchema>;

export function orphanOf(row: OrphanRow): Orphan {
  return {
    id: row.external_id,
    resourceId: row.resource_id === null ? null : Number(row.resource_id),
    slot: row.slot,
    attributes: row.attributes as Record<string, unknown>,
    firstSeenAt: iso(row.first_seen_at),
    lastSeenAt: iso(row.last_seen_at),
    passes: row.passes,
  };
}

export const OrphansAnswerSchema = z
  .object({
    blueprint: z.string(),
    orphans: z.array(OrphanSchema),
  })
  .meta({ id: 'Orphans' });

const CountByState = z.record(z.string(), z.number().int());

export const ListedBlueprintSchema = BlueprintSchema.extend({
  slotsPerResource: z.object({ min: z.number().int(), max: z.number().int() }).nullable().meta({
    description:
      "the fewest and most slots of its live resources, as their driver made them (a static pool's entries each have their own); null when none is live",
  }),
}).meta({ id: 'ListedBlueprint', description: 'a blueprint with the slots its live resources have' });
export type ListedBlueprintShape = z.infer<typeof ListedBlueprintSchema>;

export function listedBlueprintOf(listed: ListedBlueprint): ListedBlueprintShape {
  return { ...blueprintOf(listed), slotsPerResource: listed.slotsPerResource };
}

export const BlueprintDetailSchema = ListedBlueprintSchema.extend({
  resourcesByState: CountByState,
  leasesByState: CountByState,
  waitingLeases: z.number().int().meta({ description: 'leases queued at the blueprint for capacity' }),
}).meta({ id: 'BlueprintDetail', description: 'a blueprint with how many of its resources and leases are in each state' });
export type BlueprintDetailShape = z.infer<typeof BlueprintDetailSchema>;

export function blueprintDetailOf(detail: BlueprintDetail): BlueprintDetailShape {
  const { resourcesByState, leasesByState, waitingLeases } = detail;
  return { ...listedBlueprintOf(detail), resourcesByState, leasesByState, waitingLeases };
}

// --- resources ----------------------------------------------------------------

export const ResourceSchema = z
  .object({
    id: Id,
    blueprintId: Id,
    blueprintName: z.string(),
    state: stateOf('resource'),
    capacity: z.number().int().meta({ description: 'lease slots' }),
    usedSlots: z.number().int().meta({ description: 'slots taken: held by a lease, or waiting to be cleaned' }),
    allocatedForLeaseId: Id.nullable().meta({ description: 'the lease whose request made it' }),
    attributes: JsonObject.meta({ description: 'what the driver reports: a path, a host name...' }),
    labels: Labels.meta({ description: "its labels, which lease selectors match: its driver's, with its blueprint's over them" }),
    message: z.string().nullable(),
    idleSince: OptionalTimestamp,
    health: z.enum(['healthy', 'unhealthy', 'gone']).nullable().meta({ description: "its driver's last check's answer (null: never checked)" }),
    healthMessage: z.string().nullable(),
    checkedAt: OptionalTimestamp.meta({ description: 'when it was last checked (an answer like the one before moves only this)' }),
    version: z.number().int(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: 'Resource', description: "one of a blueprint's resources" });
export type Resource = z.infer<typeof ResourceSchema>;

export function resourceOf(row: ResourceView): Resource {
  return {
    id: row.id,
    blueprintId: row.blueprint_id,
    blueprintName: row.blueprint_name,
    state: row.state,
    capacity: row.capacity,
    usedSlots: row.slots_taken,
    allocatedForLeaseId: row.allocated_for_lease_id,
    attributes: row.attributes as Record<string, unknown>,
    labels: { ...resourceLabels(row.labels, row.blueprint_labels) },
    message: row.message,
    idleSince: isoOrNull(row.idle_since),
    health: row.health,
    healthMessage: row.health_message,
    checkedAt: isoOrNull(row.checked_at),
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export const ResourceDetailSchema = ResourceSchema.extend({
  slots: z.array(z.object({ slot: z.number().int(), leaseId: Id, holder: z.string(), grantedAt: Timestamp })),
  cleaningSlots: z.array(z.number().int()).meta({ description: 'slots given back and waiting to be cleaned before another lease may have them' }),
}).meta({ id: 'ResourceDetail', description: 'a resource with the leases holding its slots' });
export type ResourceDetailShape = z.infer<typeof ResourceDetailSchema>;

export function resourceDetailOf(detail: ResourceDetail): ResourceDetailShape {
  return {
    ...resourceOf(detail),
    slots: detail.slots.map((s) => ({ slot: s.slot, leaseId: s.lease_id, holder: s.holder, grantedAt: iso(s.granted_at) })),
    cleaningSlots: [...detail.cleaning],
  };
}

// --- leases -------------------------------------------------------------------

export const EndingShape = z
  .object({
    kind: z.enum(ENDING_KINDS).meta({
      description: ENDING_KINDS.map((kind) => `${kind}: ${ENDINGS[kind].means}`).join('; '),
    }),
    at: Timestamp.meta({ description: 'the time by which the lease ends' }),
    reason: z.string(),
  })
  .meta({ id: 'Ending' });

export const LeaseSchema = z
  .object({
    id: Id,
    blueprintId: Id,
    blueprintName: z.string(),
    holder: z.string(),
    state: stateOf('lease'),
    resourceId: Id.nullable(),
    slot: z.number().int().nullable(),
    attributes: JsonObject.meta({ description: "the requester's labels and what the driver reports for its slot" }),
    expiresAt: OptionalTimestamp,
    termMs: z.number().int().nullable().meta({ description: 'what a renewal without its own term extends the lease by' }),
    heartbeatMs: z.number().int().nullable(),
    heartbeatDeadline: OptionalTimestamp,
    waitDeadline: OptionalTimestamp.meta({ description: 'active by then, or the collector releases it as system:deadline' }),
    priority: z
      .number()
      .int()
      .meta({ description: '0–9: served ahead of lower priorities that have waited less than priority × its blueprint’s priorityStepMs' }),
    team: z.string().meta({ description: "its requester's team (the token's): shares and quotas count it there" }),
    selector: z.string().nullable().meta({ description: "what it needs of its resource's labels (null: any resource)" }),
    grantedAt: OptionalTimestamp.meta({ description: 'when it got its slot' }),
    endBy: OptionalTimestamp.meta({
      description:
        "the time by which it ends whatever its holder does: its grant plus its blueprint's maxHoldMs, or the end of its reservation's window if sooner, or sooner still when it is preempted (its grace period's end); no expiry is set or renewed past it",
    }),
    ending: EndingShape.nullable().meta({
      description:
        'set when its holder is told that Slipway will end it: by when, and why (kind time_limit, preempted or reservation_end); stop the work and release it by then',
    }),
    preemptible: z.boolean().meta({ description: 'false: created not to be preempted (a blueprint that preempts passes it over)' }),
    reservationId: Id.nullable().meta({ description: 'the reservation it was created to use: served from it first while its window is open' }),
    message: z.string().nullable(),
    version: z.number().int(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: 'Lease', description: "a holder's claim on a slot of one of a blueprint's resources" });
export type Lease = z.infer<typeof LeaseSchema>;

export function leaseOf(row: LeaseView): Lease {
  return {
    id: row.id,
    blueprintId: row.blueprint_id,
    blueprintName: row.blueprint_name,
    holder: row.holder,
    state: row.state,
    resourceId: row.resource_id,
    slot: row.slot,
    attributes: row.attributes as Record<string, unknown>,
    expiresAt: isoOrNull(row.expires_at),
    termMs: row.term_ms,
    heartbeatMs: row.heartbeat_ms,
    heartbeatDeadline: isoOrNull(row.heartbeat_deadline),
    waitDeadline: isoOrNull(row.wait_deadline),
    priority: row.priority,
    team: row.team,
    selector: row.selector,
    grantedAt: isoOrNull(row.granted_at),
    endBy: isoOrNull(row.end_by),
    ending: endingOf(row.ending),
    preemptible: row.preemptible,
    reservationId: row.reservation_id,
    message: row.message,
    version: row.version,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

export const LineStandingSchema = z
  .object({
    blueprintName: z.string(),
    position: z.number().int().min(1).meta({ description: '1: the next lease its blueprint serves' }),
    waiting: z.number().int().min(1).meta({ description: 'how many leases wait at the blueprint, this one included' }),
    since: Timestamp,
    estimateSeconds: z.number().min(0).nullable().meta({
      description:
        "about how long until the lease is active, in seconds to the millisecond: its team's leases ahead of it, over its team's part of the slots it may have as they come free; null when there is nothing to go by yet",
    }),
    basis: z.string().meta({ description: 'how the estimate was made, or why there is none' }),
    reason: z
      .string()
      .nullable()
      .meta({ description: 'why it waits, as its blueprint said when it joined the line (a quota, no free slot); null when not recorded' }),
    unservable: z
      .string()
      .nullable()
      .meta({ description: 'why nothing it was sent to can serve it (its estimate is then null); null when something may' }),
  })
  .meta({ id: 'LineStanding', description: "where a waiting lease stands in its blueprint's line" });
export type LineStandingShape = z.infer<typeof LineStandingSchema>;

export function lineStandingOf(standing: LineStanding): LineStandingShape {
  return { ...standing, since: iso(standing.since) };
}

// --- commands -----------------------------------------------------------------

export const CommandSchema = z
  .object({
    id: Id,
    targetKind: ObjectKindSchema,
    targetId: Id,
    kind: z.string(),
    version: z.number().int(),
    payload: JsonObject,
    issuedBy: z.string().meta({ description: 'the actor who asked: a token, a user, system:gc...' }),
    source: CommandSourceSchema,
    reason: z.string().nullable(),
    requestId: z.string().nullable(),
    causedBy: Id.nullable().meta({ description: 'the command this one follows from' }),
    status: CommandStatusSchema,
    message: z.string().nullable().meta({ description: 'the outcome, for people' }),
    dedupKey: z.string().nullable(),
    coalescedInto: Id.nullable().meta({ description: 'the command in flight this duplicate joined' }),
    notBefore: Timestamp,
    attempts: z.number().int(),
    createdAt: Timestamp,
    startedAt: OptionalTimestamp,
    finishedAt: OptionalTimestamp,
    clientAddress: z.string().nullable(),
    userAgent: z.string().nullable(),
  })
  .meta({ id: 'Command', description: "a row of an object's command queue" });
export type Command = z.infer<typeof CommandSchema>;

export function commandOf(row: CommandRow): Command {
  return {
    id: row.id,
    targetKind: row.target_kind,
    targetId: row.target_id,
    kind: row.kind,
    version: row.version,
    payload: row.payload as Record<string, unknown>,
    issuedBy: row.issued_by,
    source: row.source,
    reason: row.reason,
    requestId: row.request_id,
    causedBy: row.caused_by,
    status: row.status,
    message: row.message,
    dedupKey: row.dedup_key,
    coalescedInto: row.coalesced_into,
    notBefore: iso(row.not_before),
    attempts: row.attempts,
    createdAt: iso(row.created_at),
    startedAt: isoOrNull(row.started_at),
    finishedAt: isoOrNull(row.finished_at),
    clientAddress: row.client_address,
    userAgent: row.user_agent,
  };
}

export const CommandTreeNodeSchema = CommandSchema.extend({
  depth: z.number().int().min(0).meta({ description: 'steps below the root of the tree' }),
}).meta({ id: 'CommandTreeNode', description: 'a command in the tree of commands one command caused' });
export type CommandTreeNodeShape = z.infer<typeof CommandTreeNodeSchema>;

export function treeNodeOf(node: CommandTreeNode): CommandTreeNodeShape {
  return { ...commandOf(node), depth: node.depth };
}

export const CommandTreeSchema = z.array(CommandTreeNodeSchema).meta({ description: 'the command and everything it caused, depth-first' });

export function treeOf(tree: readonly CommandTreeNode[]): CommandTreeNodeShape[] {
  return tree.map(treeNodeOf);
}

// --- callbacks ----------------------------------------------------------------

export const CallbackAttemptSchema = z.object({
  attempt: z.number().int(),
  startedAt: Timestamp,
  finishedAt: Timestamp,
  statusCode: z.number().int().nullable().meta({ description: "the receiver's HTTP status; null when it could not be reached" }),
  error: z.string().nullable(),
  nextRetryAt: OptionalTimestamp,
});

export const CallbackSchema = z
  .object({
    id: Id,
    commandId: Id,
    url: z.string(),
    status: z.enum(['waiting', 'pending', 'delivered', 'failed']),
    attempts: z.number().int(),
    nextAttemptAt: OptionalTimestamp,
    createdAt: Timestamp,
    finishedAt: OptionalTimestamp,
    attemptLog: z.array(CallbackAttemptSchema).meta({ description: 'every delivery attempt so far, oldest first' }),
  })
  .meta({ id: 'Callback', description: 'a callback on a command, with its delivery attempts' });
export type Callback = z.infer<typeof CallbackSchema>;

function attemptOf(row: CallbackAttemptRow): z.infer<typeof CallbackAttemptSchema> {
  return {
    attempt: row.attempt,
    startedAt: iso(row.started_at),
    finishedAt: iso(row.finished_at),
    statusCode: row.status_code,
    error: row.error,
    nextRetryAt: isoOrNull(row.next_retry_at),
  };
}

export function callbackOf(view: CallbackView): Callback {
  const row: CallbackRow = view;
  return {
    id: row.id,
    commandId: row.command_id,
    url: row.url,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: isoOrNull(row.next_attempt_at),
    createdAt: iso(row.created_at),
    finishedAt: isoOrNull(row.finished_at),
    attemptLog: view.attempt_log.map(attemptOf),
  };
}

// --- history ------------------------------------------------------------------

const Who = z.string().meta({ description: "who asked (a command's issuedBy, an event's actor)" });
const Where = z.string().meta({ description: 'from where: web, cli, api, gc or system' });

// Fields in the read model's order (src/read/objectHistory.ts): zod writes them in the schema's order,
// and the CLI's local and remote --json must be the same bytes.
export const TimelineEntrySchema = z
  .discriminatedUnion('type', [
    z.object({
      type: z.literal('command'),
      at: Timestamp.meta({ description: 'when it settled; still queued or running, when it was queued' }),
      queuedAt: Timestamp,
      id: Id,
      kind: z.string(),
      status: CommandStatusSchema,
      who: Who,
      where: Where,
      reason: z.string().nullable(),
      message: z.string().nullable(),
      finishedAt: OptionalTimestamp,
    }),
    z.object({
      type: z.literal('event'),
      at: Timestamp,
      id: Id,
      event: z.string(),
      commandId: Id.nullable(),
      fromState: z.string().nullable(),
      toState: z.string().nullable(),
      who: Who,
      where: Where,
      reason: z.string().nullable(),
      message: z.string(),
    }),
  ])
  .meta({ id: 'TimelineEntry', description: 'a command asked of the object, or an event of its life' });
export type TimelineEntryShape = z.infer<typeof TimelineEntrySchema>;

function timelineEntryOf(entry: TimelineEntry): TimelineEntryShape {
  return entry.type === 'command'
    ? { ...entry, at: iso(entry.at), queuedAt: iso(entry.queuedAt), finishedAt: isoOrNull(entry.finishedAt) }
    : { ...entry, at: iso(entry.at) };
}

/** An object's queue and timeline: what each object's GET carries beside its fields. */
export const HistoryShape = {
  queue: z.array(CommandSchema).meta({ description: 'its commands not yet settled, in the order they run' }),
  timeline: z.object({
    entries: z.array(TimelineEntrySchema).meta({ description: 'oldest first' }),
    truncated: z.boolean().meta({ description: 'true when older entries were left out' }),
  }),
};

export type HistoryShapeOf = z.infer<z.ZodObject<typeof HistoryShape>>;

export function historyOf(history: ObjectHistory): HistoryShapeOf {
  return {
    queue: history.queue.map(commandOf),
    timeline: { entries: history.timeline.entries.map(timelineEntryOf), truncated: history.timeline.truncated },
  };
}

// --- tokens -------------------------------------------------------------------

/** An API token, never its secret: what `slipway token list --json` prints. */
export const TokenSchema = z.object({
  id: Id,
  name: z.string(),
  role: z.enum(['viewer', 'user', 'operator', 'admin']),
  team: z.string(),
  createdBy: z.string(),
  createdAt: Timestamp,
  lastUsedAt: OptionalTimestamp,
  revokedAt: OptionalTimestamp,
});
export type Token = z.infer<typeof TokenSchema>;

export function tokenOf(row: TokenView): Token {
  return {
    id: row.id,
    name: row.name,
    role: row.role,
    team: row.team,
    createdBy: row.created_by,
    createdAt: iso(row.created_at),
    lastUsedAt: isoOrNull(row.last_used_at),
    revokedAt: isoOrNull(row.revoked_at),
  };
}

// --- pages --------------------------------------------------------------------

/** A keyset page of `item`: `next` is the `after` of the following page, null on the last. */
export function pageSchema<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      items: z.array(item),
      next: Id.nullable().meta({ description: 'pass as `after` for the next page; null on the last page' }),
    })
    .meta({ id });
}

export function pageOf<Row extends { id: number }, T>(page: Page<Row>, itemOf: (row: Row) => T): { items: T[]; next: number | null } {
  return { items: page.items.map(itemOf), next: page.next };
}

// --- teams ----------------------------------------------------------------------

export const QuotaSchema = z
  .object({
    holder: z.string().nullable().meta({ description: 'one holder of the team; null: the whole team' }),
    blueprintId: Id.nullable().meta({ description: 'null: overall, at every blueprint' }),
    blueprintName: z.string().nullable(),
    maxLeases: z.number().int(),
    counted: z.number().int().meta({ description: 'leases it counts now: holding slots, or sent to take one' }),
    createdBy: z.string(),
    updatedAt: Timestamp,
  })
  .meta({ id: 'Quota', description: 'at most maxLeases leases of the team (or holder) at once; a request over it waits' });

export const TeamSchema = z
  .object({
    name: z.string(),
    weight: z.number().int().meta({ description: "its share of a contended blueprint, against the other teams' weights" }),
    tokens: z.number().int().meta({ description: 'live tokens in the team' }),
    counted: z.number().int().meta({ description: 'its leases holding slots, or sent to take one, at every blueprint' }),
    waiting: z.number().int().meta({ description: "its leases waiting in blueprints' lines" }),
    quotas: z.array(QuotaSchema),
    createdBy: z.string(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: 'Team', description: 'every token, and every lease, belongs to a team' });
export type Team = z.infer<typeof TeamSchema>;

export const TeamChangeSchema = z
  .object({ type: z.string(), message: z.string(), data: z.unknown(), actor: z.string(), source: z.string(), at: Timestamp })
  .meta({ id: 'TeamChange', description: 'a change to a team, its weight or its quotas, and who made it' });

export const TeamDetailSchema = TeamSchema.extend({ changes: z.array(TeamChangeSchema).meta({ description: 'newest first, the last 100' }) }).meta({
  id: 'TeamDetail',
});

export function teamOf(team: TeamView): Team {
  return {
    name: team.name,
    weight: team.weight,
    tokens: team.tokens,
    counted: team.counted,
    waiting: team.waiting,
    quotas: team.quotas.map((q) => ({ ...q, updatedAt: iso(q.updatedAt) })),
    createdBy: team.created_by,
    createdAt: iso(team.created_at),
    updatedAt: iso(team.updated_at),
  };
}

export function teamDetailOf(team: TeamDetail): z.infer<typeof TeamDetailSchema> {
  return {
    ...teamOf(team),
    changes: team.changes.map((c) => ({ type: c.type, message: c.message, data: c.data, actor: c.actor, source: c.source, at: iso(c.created_at) })),
  };
}

// --- reservations ---------------------------------------------------------------

export const ReservationSchema = z
  .object({
    id: Id,
    blueprintId: Id,
    blueprintName: z.string(),
    slots: z.number().int().meta({ description: 'how many slots it holds back during its window for the leases that name it' }),
    from: Timestamp.meta({ description: 'its window opens' }),
    to: Timestamp.meta({ description: 'its window ends' }),
    team: z.string().nullable().meta({ description: 'only leases of this team may use it; null: any team' }),
    holders: z.array(z.string()).nullable().meta({ description: 'only leases of these holders may use it; null: any holder' }),
    handBackAfterMs: z
      .number()
      .int()
      .nullable()
      .meta({ description: 'the slots its leases do not use go back to the line this long after the window opens; null: held to its end' }),
    state: z.enum(RESERVATION_STATES).meta({ description: 'upcoming (its window not open yet), active, ended or cancelled' }),
    holding: z.number().int().meta({ description: 'its leases holding a slot now' }),
    waiting: z.number().int().meta({ description: "its leases waiting in the blueprint's line" }),
    createdBy: z.string(),
    createdSource: z.string(),
    reason: z.string().nullable(),
    createdAt: Timestamp,
    cancelledAt: OptionalTimestamp,
    cancelledBy: z.string().nullable(),
    cancelledSource: z.string().nullable(),
    cancelReason: z.string().nullable(),
  })
  .meta({ id: 'Reservation', description: 'slots of a blueprint held back for a window for the leases that name it' });
export type Reservation = z.infer<typeof ReservationSchema>;

export function reservationOf(row: ReservationView): Reservation {
  return {
    id: row.id,
    blueprintId: row.blueprint_id,
    blueprintName: row.blueprint_name,
    slots: row.slots,
    from: iso(row.starts_at),
    to: iso(row.ends_at),
    team: row.team,
    holders: row.holders,
    handBackAfterMs: row.hand_back_after_ms,
    state: row.state,
    holding: row.holding,
    waiting: row.waiting,
    createdBy: row.created_by,
    createdSource: row.created_source,
    reason: row.reason,
    createdAt: iso(row.created_at),
    cancelledAt: isoOrNull(row.cancelled_at),
    cancelledBy: row.cancelled_by,
    cancelledSource: row.cancelled_source,
    cancelReason: row.cancel_reason,
  };
}

/** One reason a blueprint does not serve a lease now (src/domain/explanation.ts). */
const ExplanationReasonSchema = z
  .object({
    kind: z.enum(Object.keys(REASON_KINDS) as [ReasonKind, ...ReasonKind[]]).meta({
      description: Object.entries(REASON_KINDS)
        .map(([kind, means]) => `\`${kind}\`: ${means}`)
        .join('; '),
    }),
    says: z.string(),
    change: z
      .string()
      .nullable()
      .meta({ description: 'the smallest change found that would grant it now, or why none is needed; null when none is known' }),
  })
  .meta({ id: 'ExplanationReason' });

export const ExplanationSchema = z
  .object({
    lease: z.number().int().nullable().meta({ description: 'the lease explained; null for a dry run' }),
    state: z.string().meta({ description: "the lease's state; `not requested` for a dry run" }),
    grantedNow: z.boolean().meta({ description: "whether its blueprint's decision grants it now (or has it on its way)" }),
    goesTo: z.string().nullable().meta({ description: 'the blueprint the lease is (or the request would be) at' }),
    summary: z.string(),
    blueprints: z
      .array(
        z.object({
          blueprint: z.string(),
          grantedNow: z.boolean(),
          where: z.string().nullable().meta({ description: 'what the decision does for it when it grants it now' }),
          reasons: z.array(ExplanationReasonSchema),
        }),
      )
      .meta({ description: 'each blueprint that could serve it, with why it does not now' }),
  })
  .meta({ id: 'Explanation', description: 'why a lease waits, or would, and what would grant it now' });
export type ExplanationShape = z.infer<typeof ExplanationSchema>;
