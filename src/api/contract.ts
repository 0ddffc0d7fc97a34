import { z } from 'zod';
import type { ObjectKind } from '../../migrations/schema.ts';
import { CallbackRequestSchema } from '../callbacks/CallbackRequest.ts';
import { COMMAND_KINDS, type CommandKindSpec, kindNamesOf } from '../domain/commandKinds.ts';
import { PrioritySchema } from '../domain/priority.ts';
import { BlueprintChangesSchema, BlueprintInputSchema } from '../objects/blueprintInput.ts';
import { leaseBodySchema } from '../objects/leaseInput.ts';
import { TeamNameSchema, WeightSchema } from '../domain/team.ts';
import { SelectorTextSchema } from '../domain/labels.ts';
import { QuotaInputSchema, QuotaScopeSchema } from '../domain/quotas.ts';
import { stateFilterOf } from '../read/stateFilter.ts';
import { RESERVATION_STATES, reservationBodySchema } from '../domain/reservations.ts';
import type { Action } from './auth/roles.ts';
import {
  BlueprintDetailSchema,
  BlueprintSchema,
  ListedBlueprintSchema,
  CallbackSchema,
  CommandSchema,
  CommandStatusSchema,
  CommandTreeSchema,
  HistoryShape,
  LeaseSchema,
  LineStandingSchema,
  ExplanationSchema,
  OrphansAnswerSchema,
  pageSchema,
  TeamDetailSchema,
  TeamSchema,
  ReservationSchema,
  ResourceDetailSchema,
  ResourceSchema,
} from './shapes.ts';
import { BlueprintParams, BlueprintRef, CreateLeaseQuery, IdParams, NumericId, PageQuery, Reason, TargetRef, WaitQuery } from './schemas.ts';

/**
 * THE API's operations, as data: each one's method and path, what the
 * caller's role must allow, and the zod schemas of its request parts and of
 * its answers per status code. The server's routes (src/api/routes/) are
 * declared from these, so fastify validates and serializes with them and the
 * OpenAPI document is generated from them; the typed client (src/client/)
 * builds its requests and parses the answers with them. Nothing here touches
 * fastify or the database, so the CLI loads it cheaply.
 */
export interface Operation {
  readonly operationId: string;
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly url: string;
  readonly summary: string;
  readonly description?: string;
  /** What the caller's role must allow; an operation without one is public. */
  readonly action?: Action;
  readonly params?: z.ZodType;
  readonly query?: z.ZodType;
  readonly body?: z.ZodType;
  /** The successful answers: status → what it means and its body. */
  readonly responses: Readonly<Record<number, Answer>>;
}

export interface Answer<S extends z.ZodType = z.ZodType> {
  readonly description: string;
  readonly schema: S;
}

const answer = <S extends z.ZodType>(description: string, schema: S): Answer<S> => ({ description, schema });

// --- request parts --------------------------------------------------------------

/**
 * A lease request: the shared lease body (with its expiry fields and rules)
 * without a holder, which is always the calling token's actor
 * (`token:<name>`), so a `user` token can later release what it created.
 * Its `callback` is the holder's, not a command's: a lease's first command
 * can settle while the lease still waits for capacity (see docs/api.md,
 * "Asynchronous semantics"), so a callback on it could not say what a caller
 * wants to know (`?wait` and polling the lease do). The holder's callback is
 * told instead when Slipway ends the lease itself: when a check finds its
 * resource gone, or the collector releases it for a deadline
 * (docs/callbacks.md, "The holder's callback").
 */
export const CreateLeaseBody = leaseBodySchema({
  blueprint: z
    .union([z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'expected a blueprint name'), NumericId])
    .optional()
    .meta({ description: "the blueprint's name, or its id; left out, the selector chooses one (give at least one of the two)" }),
  selector: SelectorTextSchema.optional().meta({
    description:
      'what the lease needs of its resource\'s labels, in the Kubernetes label-selector grammar ("gpu=a100, os in (linux, bsd), !spot"): granted only a slot on a resource that matches; 400 if no resource can ever match',
  }),
  attributes: z.record(z.string().max(100), z.unknown()).optional().meta({ description: "the requester's own labels, kept on the lease" }),
  reason: Reason.optional(),
  priority: PrioritySchema.optional().meta({
    description:
      "0 (the default) to 9: served ahead of lower priorities that have waited less than priority × the blueprint's priorityStepMs; a user token may ask for 0–4",
  }),
  queue: z.boolean().optional().meta({
    description:
      "false: refused at once (429, naming the quota) if a quota of the token's team or of the holder is reached, rather than waiting in line; true (the default): such a request waits, and says why",
  }),
  preemptible: z.boolean().optional().meta({
    description:
      "false: not to be preempted by a blueprint that preempts (429, naming the allowance, if the token's team already has its blueprint's preemption.protectedPerTeam of them); true (the default): it may be",
  }),
  reservation: NumericId.optional().meta({
    description:
      "a reservation the lease is to use: during its window it is served from the reservation's slots first, ahead of the line; 409 if the token's team or holder may not use it, it was cancelled, or its window is not open now; 404 if there is none. Without a blueprint, the reservation's",
  }),
  callback: CallbackRequestSchema.optional().meta({
    description:
      "the holder's callback: told, as a command's callback is, when Slipway ends the lease itself (a check found its resource gone, the collector released it for its expiry, heartbeat or wait deadline, or it was preempted), and when an end it was told of is withdrawn",
  }),
});

export const LeaseListQuery = z
  .object({
    state: stateFilterOf('lease').optional().meta({ description: 'a state, or live: every state but destroyed' }),
    blueprint: BlueprintRef.optional(),
    holder: z.string().min(1).max(200).optional(),
    ...PageQuery,
  })
  .strict();

export const ResourceListQuery = z
  .object({
    state: stateFilterOf('resource').optional().meta({ description: 'a state, or live: every state but destroyed' }),
    blueprint: BlueprintRef.optional(),
    ...PageQuery,
  })
  .strict();

export const BlueprintListQuery = z
  .object({
    state: stateFilterOf('blueprint').optional().meta({ description: 'a state, or live (the default): every state but archived' }),
    ...PageQuery,
  })
  .strict();

export const CommandListQuery = z
  .object({
    status: CommandStatusSchema.optional(),
    kind: z
      .string()
      .regex(/^[a-z_]{1,40}$/, 'expected a command kind, e.g. release')
      .optional(),
    target: TargetRef.optional(),
    ...PageQuery,
  })
  .strict();

export const CancelBody = z.object({ reason: Reason.optional() }).strict();

export const ReservationListQuery = z
  .object({
    blueprint: BlueprintRef.optional(),
    state: z.enum(RESERVATION_STATES).optional().meta({ description: 'upcoming, active, ended or cancelled' }),
  })
  .strict();

/** A reservation request: the domain's body, the blueprint as the API names it, and why. */
const CreateReservationBody = reservationBodySchema({
  blueprint: z
    .union([z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'expected a blueprint name'), NumericId])
    .meta({ description: "the blueprint's name, or its id" }),
  reason: Reason.optional(),
});

const TeamParams = z.object({ name: TeamNameSchema }).strict();
/** A quota's scope and maximum, the team named by the path. */
const QuotaBody = QuotaInputSchema.omit({ team: true }).strict();
const QuotaScopeBody = QuotaScopeSchema.omit({ team: true }).strict();

/** The kinds a caller may request of each object (the others Slipway issues itself). */
function requestableKinds(target: ObjectKind): [string, ...string[]] {
  const kinds = Object.entries(COMMAND_KINDS[target] as Record<string, CommandKindSpec>)
    .filter(([, spec]) => !spec.internal)
    .map(([kind]) => kind);
  return kinds as [string, ...string[]];
}

/** What the body's `kind` says of the kinds' old names, if the target has any (see renamed in domain/commandKinds.ts). */
function kindNote(target: ObjectKind): { description?: string } {
  const old = Object.entries(kindNamesOf(target).old);
  if (old.length === 0) return {};
  const names = old.map(([kind, to]) => `${kind} (appended as ${to})`).join(', ');
  return { description: `deprecated names, still taken: ${names}; the answer then carries a Deprecation header` };
}

/**
 * `{ kind, reason?, version?, payload?, callback? }`: the payload is checked
 * against the kind's schema when appended, the callback's host against the
 * allow-list when attached.
 */
function commandBody(target: ObjectKind) {
  return z
    .object({
      kind: z.enum(requestableKinds(target)).meta(kindNote(target)),
      reason: Reason.optional(),
      version: z.number().int().min(1).optional().meta({ description: "the payload's schema version; default: the newest" }),
      payload: z.record(z.string(), z.unknown()).optional(),
      callback: CallbackRequestSchema.optional(),
    })
    .strict();
}

// --- answers --------------------------------------------------------------------

const LeasePage = pageSchema(LeaseSchema, 'LeasePage');
const ResourcePage = pageSchema(ResourceSchema, 'ResourcePage');
const BlueprintPage = pageSchema(ListedBlueprintSchema, 'BlueprintPage');
const CommandPage = pageSchema(CommandSchema, 'CommandPage');

const WaitOutcome = z
  .enum(['settled', 'timed_out', 'aborted'])
  .meta({ description: 'how the wait ended: the tree settled, the time ran out, or the server stopped waiting (it is shutting down)' });

/**
 * A queued command. With `?wait`, also how the wait ended, the target's state
 * and the tree; `command` is then the tree's root as it is now.
 */
export const CommandAnswerSchema = z
  .object({
    command: CommandSchema,
    coalesced: z.boolean().meta({ description: 'true when this duplicate joined a command already in flight (then `command` is that one)' }),
    // The row that records this request: the duplicate's own row when it joined one.
    record: CommandSchema,
    outcome: WaitOutcome.optional(),
    state: z.string().optional().meta({ description: "with ?wait: the target's state afterwards" }),
    tree: CommandTreeSchema.optional(),
  })
  .meta({ id: 'CommandAnswer' });
export type CommandAnswer = z.infer<typeof CommandAnswerSchema>;

/** A requested lease and its first command; with `?wait`, also how the wait ended and the tree. */
export const LeaseAnswerSchema = z
  .object({
    lease: LeaseSchema,
    command: CommandSchema,
    outcome: WaitOutcome.optional(),
    tree: CommandTreeSchema.optional(),
  })
  .meta({ id: 'LeaseAnswer' });
export type LeaseAnswer = z.infer<typeof LeaseAnswerSchema>;

/** A lease request's 200 answer as a lease's: a request without `dryRun` gets no explanation. */
export function leaseAnswerOf(body: LeaseAnswer | z.infer<typeof ExplanationSchema>): LeaseAnswer {
  if ('command' in body) return body;
  throw new Error(`expected a lease in the answer, got a dry run's explanation: ${body.summary}`);
}

export const LeaseDetailSchema = z
  .object({
    lease: LeaseSchema,
    line: LineStandingSchema.nullable().meta({ description: "where the lease stands in its blueprint's waiting line; null when it is not waiting" }),
    ...HistoryShape,
  })
  .meta({ id: 'LeaseDetail' });
export type LeaseDetail = z.infer<typeof LeaseDetailSchema>;
export const ResourceDetailAnswerSchema = z.object({ resource: ResourceDetailSchema, ...HistoryShape }).meta({ id: 'ResourceWithHistory' });
export const BlueprintDetailAnswerSchema = z.object({ blueprint: BlueprintDetailSchema, ...HistoryShape }).meta({ id: 'BlueprintWithHistory' });
export const CommandDetailSchema = z
  .object({
    command: CommandSchema,
    tree: CommandTreeSchema,
    callbacks: z.array(CallbackSchema).meta({ description: 'its callbacks, oldest first, each with every delivery attempt' }),
  })
  .meta({ id: 'CommandDetail' });
export type CommandDetailShape = z.infer<typeof CommandDetailSchema>;
export const CancelAnswerSchema = z.object({ command: CommandSchema }).meta({ id: 'CancelAnswer' });
export type CancelAnswer = z.infer<typeof CancelAnswerSchema>;

const queuedAnswers = {
  202: answer('queued (Location: the command); with ?wait, the wait ran out first', CommandAnswerSchema),
  200: answer('a duplicate that joined the command already in flight, or with ?wait, settled (the tree says how)', CommandAnswerSchema),
};

// --- the operations -------------------------------------------------------------

/** The objects that take commands over the API, as data: path, kind, what the caller's role must allow. */
export const COMMAND_TARGETS = [
  { path: 'leases', kind: 'lease', action: 'lease.command', operationId: 'queueLeaseCommand' },
  { path: 'resources', kind: 'resource', action: 'resource.command', operationId: 'queueResourceCommand' },
  { path: 'blueprints', kind: 'blueprint', action: 'blueprint.write', operationId: 'queueBlueprintCommand' },
] as const satisfies ReadonlyArray<{ path: string; kind: ObjectKind; action: Action; operationId: string }>;

const queueCommand = <K extends ObjectKind>(target: { path: string; kind: K; action: Action; operationId: string }) =>
  ({
    operationId: target.operationId,
    method: 'POST',
    url: `/v1/${target.path}/:id/commands`,
    summary: `Queue a command on a ${target.kind}`,
    description: `Appends a command to the ${target.kind}'s queue: 202 with its Location, or 200 for a duplicate that joined the one in flight. \`?wait=<s>\` holds the answer until the command and all it caused have settled (200), or the time runs out (202).`,
    action: target.action,
    params: IdParams,
    query: WaitQuery,
    body: commandBody(target.kind),
    responses: queuedAnswers,
  }) as const;

export const OPERATIONS = {
  createBlueprint: {
    operationId: 'createBlueprint',
    method: 'POST',
    url: '/v1/blueprints',
    summary: 'Create a blueprint',
    description: 'A named pool on a driver, with its limits; nothing is allocated until a lease asks.',
    action: 'blueprint.write',
    body: BlueprintInputSchema,
    responses: { 201: answer('created (Location: the blueprint)', BlueprintSchema) },
  },
  listBlueprints: {
    operationId: 'listBlueprints',
    method: 'GET',
    url: '/v1/blueprints',
    summary: 'List blueprints',
    description: 'Oldest first unless order=newest; keyset pages; live ones (not archived) unless state says otherwise.',
    action: 'read',
    query: BlueprintListQuery,
    responses: { 200: answer('a page of blueprints', BlueprintPage) },
  },
  getBlueprint: {
    operationId: 'getBlueprint',
    method: 'GET',
    url: '/v1/blueprints/:ref',
    summary: 'Show a blueprint',
    description: 'A blueprint (by id or name) with its usage by state, its queue and its timeline.',
    action: 'read',
    params: BlueprintParams,
    responses: { 200: answer('the blueprint', BlueprintDetailAnswerSchema) },
  },
  listOrphans: {
    operationId: 'listOrphans',
    method: 'GET',
    url: '/v1/blueprints/:ref/orphans',
    summary: "List a blueprint's orphans",
    description:
      'What its driver lists that no resource stands for, as the collector\'s last pass found it (docs/operations.md, "Orphans"). Empty for a driver that cannot list.',
    action: 'read',
    params: BlueprintParams,
    responses: { 200: answer("the blueprint's orphans, longest known first", OrphansAnswerSchema) },
  },
  updateBlueprint: {
    operationId: 'updateBlueprint',
    method: 'PATCH',
    url: '/v1/blueprints/:ref',
    summary: "Change a blueprint's limits",
    description: 'Applied at once; room it makes goes to the waiting leases. Driver settings change through the update_settings command.',
    action: 'blueprint.write',
    params: BlueprintParams,
    body: BlueprintChangesSchema,
    responses: { 200: answer('the blueprint as changed', BlueprintSchema) },
  },
  disableBlueprint: {
    operationId: 'disableBlueprint',
    method: 'POST',
    url: '/v1/blueprints/:ref/disable',
    summary: 'Disable a blueprint',
    description: 'It takes no new leases; the leases it has carry on, waiting ones keep waiting.',
    action: 'blueprint.write',
    params: BlueprintParams,
    body: z.object({}).strict(),
    responses: { 200: answer('the blueprint as changed', BlueprintSchema) },
  },
  enableBlueprint: {
    operationId: 'enableBlueprint',
    method: 'POST',
    url: '/v1/blueprints/:ref/enable',
    summary: 'Enable a blueprint',
    description: 'It takes leases again; waiting ones are served from the room there is.',
    action: 'blueprint.write',
    params: BlueprintParams,
    body: z.object({}).strict(),
    responses: { 200: answer('the blueprint as changed', BlueprintSchema) },
  },
  archiveBlueprint: {
    operationId: 'archiveBlueprint',
    method: 'POST',
    url: '/v1/blueprints/:ref/archive',
    summary: 'Archive a blueprint',
    description:
      'Once none of its leases and resources is live: it is kept for its history, leaves the lists of live blueprints (`?state=archived` lists them), takes no leases and changes no more, for good. 409 while something of it is live, saying what.',
    action: 'blueprint.write',
    params: BlueprintParams,
    body: z.object({}).strict(),
    responses: { 200: answer('the blueprint as changed', BlueprintSchema) },
  },
  createLease: {
    operationId: 'createLease',
    method: 'POST',
    url: '/v1/leases',
    summary: 'Request a lease',
    description:
      "The holder is the token's actor. 202 with the Location of its first command; `?wait=<s>` holds the answer until the lease is active or has failed (200), or the time runs out (202). `?dryRun=true` requests nothing: 200 with whether it would be granted now, where, or why not, and what would grant it (an Explanation).",
    action: 'lease.create',
    query: CreateLeaseQuery,
    body: CreateLeaseBody,
    responses: {
      202: answer('requested (Location: its first command); with ?wait, the wait ran out first', LeaseAnswerSchema),
      200: answer(
        'with ?wait: the lease is set up, or has failed (the tree says how); with ?dryRun=true: the explanation',
        z.union([LeaseAnswerSchema, ExplanationSchema]),
      ),
    },
  },
  listLeases: {
    operationId: 'listLeases',
    method: 'GET',
    url: '/v1/leases',
    summary: 'List leases',
    description: 'Oldest first unless order=newest, filtered by state (or live: all but destroyed), blueprint and holder.',
    action: 'read',
    query: LeaseListQuery,
    responses: { 200: answer('a page of leases', LeasePage) },
  },
  getLease: {
    operationId: 'getLease',
    method: 'GET',
    url: '/v1/leases/:id',
    summary: 'Show a lease',
    description: "A lease's fields, its queue and its timeline.",
    action: 'read',
    params: IdParams,
    responses: { 200: answer('the lease', LeaseDetailSchema) },
  },
  explainLease: {
    operationId: 'explainLease',
    method: 'GET',
    url: '/v1/leases/:id/explanation',
    summary: 'Explain why a lease waits',
    description:
      "Whether its blueprint's decision would grant it now and, if not, every reason, each with the smallest change found that would grant it now. The decision itself is run, and rolled back: nothing is written.",
    action: 'read',
    params: IdParams,
    responses: { 200: answer('the explanation', ExplanationSchema) },
  },
  listResources: {
    operationId: 'listResources',
    method: 'GET',
    url: '/v1/resources',
    summary: 'List resources',
    description: 'Oldest first unless order=newest, filtered by state (or live: all but destroyed) and blueprint.',
    action: 'read',
    query: ResourceListQuery,
    responses: { 200: answer('a page of resources', ResourcePage) },
  },
  getResource: {
    operationId: 'getResource',
    method: 'GET',
    url: '/v1/resources/:id',
    summary: 'Show a resource',
    description: "A resource's fields, the leases holding its slots, its queue and its timeline.",
    action: 'read',
    params: IdParams,
    responses: { 200: answer('the resource', ResourceDetailAnswerSchema) },
  },
  queueLeaseCommand: queueCommand(COMMAND_TARGETS[0]),
  queueResourceCommand: queueCommand(COMMAND_TARGETS[1]),
  queueBlueprintCommand: queueCommand(COMMAND_TARGETS[2]),
  listCommands: {
    operationId: 'listCommands',
    method: 'GET',
    url: '/v1/commands',
    summary: 'List commands',
    description: 'Oldest first unless order=newest, filtered by status, kind and target.',
    action: 'read',
    query: CommandListQuery,
    responses: { 200: answer('a page of commands', CommandPage) },
  },
  getCommand: {
    operationId: 'getCommand',
    method: 'GET',
    url: '/v1/commands/:id',
    summary: 'Show a command',
    description: 'A command, its status and outcome, the tree of commands it caused, and its callbacks with every delivery attempt.',
    action: 'read',
    params: IdParams,
    responses: { 200: answer('the command', CommandDetailSchema) },
  },
  cancelCommand: {
    operationId: 'cancelCommand',
    method: 'POST',
    url: '/v1/commands/:id/cancel',
    summary: 'Cancel a queued command',
    description: 'Only a command still queued can be cancelled: 409 once it is running or settled.',
    action: 'command.cancel',
    params: IdParams,
    body: CancelBody,
    responses: { 200: answer('cancelled', CancelAnswerSchema) },
  },
  listTeams: {
    operationId: 'listTeams',
    method: 'GET',
    url: '/v1/teams',
    summary: 'List teams',
    description: 'Every team, by name, with its weight, its quotas and what it holds and waits for now.',
    action: 'read',
    responses: { 200: answer('the teams', z.object({ items: z.array(TeamSchema) })) },
  },
  getTeam: {
    operationId: 'getTeam',
    method: 'GET',
    url: '/v1/teams/:name',
    summary: 'Show a team',
    description: 'A team, its quotas with what each counts now, and every change made to it, with who made it.',
    action: 'read',
    params: TeamParams,
    responses: { 200: answer('the team', TeamDetailSchema) },
  },
  setTeam: {
    operationId: 'setTeam',
    method: 'POST',
    url: '/v1/teams/:name',
    summary: 'Make a team, or set its weight',
    description:
      "A team's weight is its share of a contended blueprint against the weights of the other teams waiting or holding there (1 unless given).",
    action: 'team.write',
    params: TeamParams,
    body: z.object({ weight: WeightSchema.optional() }).strict(),
    responses: { 200: answer('the team as it is now', TeamSchema) },
  },
  setQuota: {
    operationId: 'setQuota',
    method: 'POST',
    url: '/v1/teams/:name/quotas',
    summary: 'Set a quota',
    description:
      'At most maxLeases leases of the team (or of one holder in it) at once, at one blueprint or overall. A request over it waits (or, with queue: false, is refused with 429); a lower quota ends no lease.',
    action: 'team.write',
    params: TeamParams,
    body: QuotaBody,
    responses: { 200: answer('the team as it is now', TeamSchema) },
  },
  removeQuota: {
    operationId: 'removeQuota',
    method: 'POST',
    url: '/v1/teams/:name/quotas/remove',
    summary: 'Remove a quota',
    description: 'The quota of that scope goes; the waiters it held back are served.',
    action: 'team.write',
    params: TeamParams,
    body: QuotaScopeBody,
    responses: { 200: answer('the team as it is now', TeamSchema) },
  },
  createReservation: {
    operationId: 'createReservation',
    method: 'POST',
    url: '/v1/reservations',
    summary: 'Reserve slots of a blueprint for a window',
    description:
      "During the window, the slots are held back from leases that do not name the reservation, and leases that name it (and that its team and holders allow) are served from them first, ahead of the line. 409, with nothing written, when the blueprint's capacity less the other reservations overlapping the window cannot hold it, saying how many could be.",
    action: 'blueprint.write',
    body: CreateReservationBody,
    responses: { 201: answer('made (Location: the reservation)', ReservationSchema) },
  },
  listReservations: {
    operationId: 'listReservations',
    method: 'GET',
    url: '/v1/reservations',
    summary: 'List reservations',
    description: 'By window, the soonest first, filtered by blueprint and state; at most 1,000.',
    action: 'read',
    query: ReservationListQuery,
    responses: { 200: answer('the reservations', z.object({ items: z.array(ReservationSchema) })) },
  },
  getReservation: {
    operationId: 'getReservation',
    method: 'GET',
    url: '/v1/reservations/:id',
    summary: 'Show a reservation',
    description: 'Its window, who may use it, how many of its leases hold or wait, and who made or cancelled it.',
    action: 'read',
    params: IdParams,
    responses: { 200: answer('the reservation', ReservationSchema) },
  },
  cancelReservation: {
    operationId: 'cancelReservation',
    method: 'POST',
    url: '/v1/reservations/:id/cancel',
    summary: 'Cancel a reservation',
    description:
      'The slots it holds back go to the line at once; its leases keep what they hold, and those still waiting are served as any other. 409 once it has ended or was cancelled.',
    action: 'blueprint.write',
    params: IdParams,
    body: CancelBody,
    responses: { 200: answer('the reservation as cancelled', ReservationSchema) },
  },
} as const satisfies Record<string, Operation>;

export type Operations = typeof OPERATIONS;
