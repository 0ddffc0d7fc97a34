import type { ColumnType, Generated, GeneratedAlways, Insertable, Selectable } from 'kysely';

/**
 * Kysely's view of the tables that the migrations beside this file create.
 * Kept by hand, next to the SQL that defines them: a change to a migration
 * changes this file in the same commit. `test/db/schema.test.ts` checks
 * that every table and column named here exists in the migrated database.
 */
type Timestamp = ColumnType<Date, Date | string, Date | string>;
/** A timestamp with a default: optional on insert. */
type TimestampDefault = ColumnType<Date, Date | string | undefined, Date | string>;
/** jsonb: read as parsed JSON, written as a JSON string. */
type Json = ColumnType<unknown, string, string>;
type JsonDefault = ColumnType<unknown, string | undefined, string>;

export type ObjectKind = 'blueprint' | 'resource' | 'lease';
export type CommandSource = 'web' | 'cli' | 'api' | 'gc' | 'system';
export type ResourceHealth = 'healthy' | 'unhealthy' | 'gone';
export type CommandStatus = 'queued' | 'running' | 'done' | 'failed' | 'cancelled' | 'coalesced';

export interface BlueprintsTable {
  id: GeneratedAlways<number>;
  name: string;
  driver: string;
  settings: Json;
  max_resources: number;
  leases_per_resource: number;
  state: Generated<string>;
  live_resources: Generated<number>;
  min_resources: Generated<number>;
  idle_timeout_ms: number | null;
  /** How often the collector asks each resource to be checked (null: never). */
  check_interval_ms: Generated<number | null>;
  /** Each slot a lease gives back is cleaned by the driver before another lease may have it. */
  clean_between_leases: Generated<boolean>;
  /** Failed cleanings in a row that quarantine a resource. */
  clean_attempts: Generated<number>;
  /** How much waiting one level of a lease's priority is worth in this blueprint's line. */
  priority_step_ms: Generated<number>;
  /** Labels every resource of the blueprint carries (0028). */
  labels: JsonDefault;
  /** What the collector does with an orphan its driver lists (0032). */
  orphans: Generated<OrphansSetting>;
  /** Every set of labels its driver may report for a resource under its settings; null where the driver's program decides them (0033). */
  possible_labels: Json | null;
  /** The longest a lease may be held, from its grant to its end, renewals included (null: no limit; 0035). */
  max_hold_ms: number | null;
  /** How fast what a team used at the blueprint is forgotten, for fair share (0036). */
  fair_share_half_life_ms: Generated<number>;
  /** Its preemption settings, domain/preemption.ts (null: it preempts nothing; 0037). */
  preemption: Json | null;
  /** The latest end of a reservation made at the blueprint (null: none; 0039). */
  reserved_until: Timestamp | null;
  version: Generated<number>;
  created_at: TimestampDefault;
  updated_at: TimestampDefault;
}

export interface ResourcesTable {
  id: GeneratedAlways<number>;
  blueprint_id: number;
  state: Generated<string>;
  capacity: number;
  used_slots: Generated<number>;
  allocated_for_lease_id: number | null;
  attributes: JsonDefault;
  /** The labels its driver reported when it allocated it; the blueprint's labels go over them (0028). */
  labels: JsonDefault;
  /** The selector of the lease it was made for, for a driver choosing what to allocate (0028). */
  selector: string | null;
  message: string | null;
  idle_since: Timestamp | null;
  /** The last answer of its driver's check, why, and when it was given (a repeated answer moves only checked_at). */
  health: Generated<ResourceHealth | null>;
  health_message: Generated<string | null>;
  checked_at: Generated<Date | null>;
  version: Generated<number>;
  created_at: TimestampDefault;
  updated_at: TimestampDefault;
}

export interface LeasesTable {
  id: GeneratedAlways<number>;
  blueprint_id: number;
  holder: string;
  state: Generated<string>;
  resource_id: number | null;
  slot: number | null;
  attributes: JsonDefault;
  expires_at: Timestamp | null;
  term_ms: number | null;
  heartbeat_ms: number | null;
  heartbeat_deadline: Timestamp | null;
  /** The time by which the lease must be active, or the collector releases it as `system:deadline`. */
  wait_deadline: Timestamp | null;
  /** 0–9: served ahead of lower priorities that have waited less than priority × the blueprint's priority_step_ms. */
  priority: Generated<number>;
  /** The requester's team (its token's; `default` for a lease of the release before 0027). */
  team: Generated<string>;
  /** What the lease needs of its resource's labels, as canonical selector text (0028). */
  selector: string | null;
  /** The holder's callback: told when Slipway ends the lease itself (its resource found gone). */
  callback_url: Generated<string | null>;
  /** When the lease got its slot (0035). */
  granted_at: Timestamp | null;
  /** The time by which it ends whatever its holder does: its grant plus its blueprint's longest hold (0035). */
  end_by: Timestamp | null;
  /** When its holder is to be told its end is near; null once told (0035). */
  end_notice_at: Timestamp | null;
  /** What its holder has been told of its end, `{kind, at, reason}` (src/domain/ending.ts; 0035). */
  ending: Json | null;
  /** False for a lease created not to be preempted (0037). */
  preemptible: Generated<boolean>;
  /** The reservation it was created to use (0039). */
  reservation_id: number | null;
  /** The end of that reservation's window when it was created: it ends by then (0039). */
  reservation_ends_at: Timestamp | null;
  message: string | null;
  version: Generated<number>;
  created_at: TimestampDefault;
  updated_at: TimestampDefault;
}

export interface ResourceSlotsTable {
  resource_id: number;
  slot: number;
  /** null: the slot waits to be cleaned (taken, so nobody is granted it). */
  lease_id: number | null;
  granted_at: TimestampDefault;
}

export interface BlueprintWaitersTable {
  lease_id: number;
  blueprint_id: number;
  since: Timestamp;
  /** The lease's team: the line is read by team (0027). */
  team: Generated<string>;
  created_at: TimestampDefault;
  /** Why it waits, as the blueprint said when it joined (0030); null from a worker before it. */
  why: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface CommandsTable {
  id: GeneratedAlways<number>;
  target_kind: ObjectKind;
  target_id: number;
  kind: string;
  version: Generated<number>;
  payload: JsonDefault;
  issued_by: string;
  source: CommandSource;
  reason: string | null;
  request_id: string | null;
  caused_by: number | null;
  status: Generated<CommandStatus>;
  message: string | null;
  dedup_key: string | null;
  coalesced_into: number | null;
  not_before: TimestampDefault;
  attempts: Generated<number>;
  created_at: TimestampDefault;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
  client_address: ColumnType<string | null, string | null | undefined, string | null>;
  user_agent: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface EventsTable {
  id: GeneratedAlways<number>;
  target_kind: ObjectKind;
  target_id: number;
  command_id: number | null;
  type: string;
  from_state: string | null;
  to_state: string | null;
  message: string;
  actor: string;
  source: string;
  data: Json | null;
  created_at: TimestampDefault;
}

export interface WorkersTable {
  id: string;
  hostname: string;
  pid: number;
  handles: Json;
  started_at: TimestampDefault;
  heartbeat_at: TimestampDefault;
  /** graphile-worker pool ids whose job locks this worker answers for (0014). */
  job_lockers: Generated<string[]>;
  /** The Slipway version the worker runs (0014; null for workers before it). */
  version: string | null;
}

export interface SimulatedEffectsTable {
  operation: string;
  object_id: number;
  idempotency_key: string;
  calls: Generated<number>;
  first_at: TimestampDefault;
  last_at: TimestampDefault;
}

export interface StaticPoolClaimsTable {
  blueprint_id: number;
  entry: string;
  resource_id: number;
  definition: Json;
  claimed_at: TimestampDefault;
}

export type CallbackStatus = 'waiting' | 'pending' | 'delivered' | 'failed';

export interface CommandCallbacksTable {
  id: GeneratedAlways<number>;
  command_id: number;
  url: string;
  status: Generated<CallbackStatus>;
  attempts: Generated<number>;
  next_attempt_at: Timestamp | null;
  created_at: TimestampDefault;
  finished_at: Timestamp | null;
  /** False while a due delivery's graphile-worker job is still to be queued (migration 0016). */
  job_queued: Generated<boolean>;
}

export interface CallbackAttemptsTable {
  id: GeneratedAlways<number>;
  callback_id: number;
  attempt: number;
  started_at: Timestamp;
  finished_at: TimestampDefault;
  status_code: number | null;
  error: string | null;
  next_retry_at: Timestamp | null;
}

/** A blueprint's `orphans` setting, as its check constraint allows (src/domain/orphans.ts says what each means). */
export type OrphansSetting = 'report' | 'destroy';

/** Something a blueprint's driver listed that no resource stands for, as the collector's last pass found it (0032). */
export interface OrphansTable {
  blueprint_id: number;
  /** The driver's own id for it. */
  external_id: string;
  /** The resource it was made for, as the driver reported it (none such is live). */
  resource_id: number | null;
  attributes: JsonDefault;
  first_seen_at: TimestampDefault;
  last_seen_at: TimestampDefault;
  /** The collector's passes in a row that found it unmatched. */
  passes: Generated<number>;
  /** Set: the orphan is this slot of `resource_id`, a live resource, that no lease holds. */
  slot: number | null;
}

export type GcPassStatus = 'running' | 'done' | 'failed' | 'skipped';

export interface GcPassesTable {
  id: GeneratedAlways<number>;
  trigger: 'schedule' | 'cli';
  status: Generated<GcPassStatus>;
  started_at: TimestampDefault;
  finished_at: Timestamp | null;
  report: JsonDefault;
  message: string | null;
}

/** One collector pass's sample of the whole system (migration 0020): the marks the next sample counts from, and the commands since the previous one. */
export interface UsageSamplesTable {
  pass_id: number;
  sampled_at: TimestampDefault;
  last_command_id: number;
  last_event_id: number;
  /** Commands appended since the previous sample (null in a first sample). */
  commands_appended: number | null;
  /** Commands that failed since the previous sample (null in a first sample). */
  commands_failed: number | null;
  /** Leases made active since the previous sample, and how long they waited (null: none, or a first sample). */
  leases_activated: number | null;
  wait_p50_ms: number | null;
  wait_p95_ms: number | null;
}

/** One blueprint's use in a sample: live leases and resources by state, its waiting line, and the waits of the leases made active since the previous sample. */
export interface BlueprintUsageSamplesTable {
  pass_id: number;
  blueprint_id: number;
  leases: Json;
  leases_waiting: number;
  resources: Json;
  leases_activated: number | null;
  wait_p50_ms: number | null;
  wait_p95_ms: number | null;
}

export type TokenRole = 'viewer' | 'user' | 'operator' | 'admin';

export interface ApiTokensTable {
  id: GeneratedAlways<number>;
  name: string;
  role: TokenRole;
  secret_sha256: string;
  /** The team its leases belong to (0027). */
  team: Generated<string>;
  created_by: string;
  created_at: TimestampDefault;
  last_used_at: Timestamp | null;
  revoked_at: Timestamp | null;
}

/** A team: every token and lease belongs to one; its weight is its share of a contended blueprint (0027). */
export interface TeamsTable {
  name: string;
  weight: Generated<number>;
  created_by: string;
  created_at: TimestampDefault;
  updated_at: TimestampDefault;
}

/**
 * What a team used at a blueprint, decayed with the blueprint's half-life, as
 * of `at`: written only by the blueprint's drain (0036, decision 0040).
 */
/** A preemption under way at a blueprint: written only by its drain (0037, decision 0043). */
export interface PreemptionsTable {
  victim_lease_id: number;
  blueprint_id: number;
  for_lease_id: number;
  resource_id: number;
  created_at: TimestampDefault;
  ends_by: Timestamp;
  reason: string;
}

/** Slots of a blueprint held for a window for the leases that name it: written only under the blueprint's lock (0039, decision 0045). */
export interface ReservationsTable {
  id: GeneratedAlways<number>;
  blueprint_id: number;
  slots: number;
  starts_at: Timestamp;
  ends_at: Timestamp;
  /** Only leases of this team may use it (null: any team). */
  team: string | null;
  /** Only leases of these holders may use it (null: any holder). */
  holders: string[] | null;
  /** How long after the window opens the slots its leases do not use go back to the line (null: held to its end). */
  hand_back_after_ms: number | null;
  created_by: string;
  created_source: string;
  reason: string | null;
  created_at: TimestampDefault;
  cancelled_at: Timestamp | null;
  cancelled_by: string | null;
  cancelled_source: string | null;
  cancel_reason: string | null;
}

export interface TeamUsageTable {
  blueprint_id: number;
  team: string;
  /** Slot-seconds used, each second weighed by 2^(-its age ÷ half-life). */
  slot_seconds: number;
  /** Leases granted, each weighed as its grant's second is. */
  grants: number;
  /** Slots held as the blueprint's last decision left them; null when its line was left empty (releases are not told to it then). */
  held: number | null;
  at: Timestamp;
}

/** At most max_leases leases of a team (or of one holder in it) counted at once, at one blueprint or (blueprint_id null) overall. */
export interface QuotasTable {
  id: GeneratedAlways<number>;
  team: string;
  holder: string | null;
  blueprint_id: number | null;
  max_leases: number;
  created_by: string;
  created_at: TimestampDefault;
  updated_at: TimestampDefault;
}

/** Every change to a team, its weight or its quotas, with who made it. */
export interface TeamEventsTable {
  id: GeneratedAlways<number>;
  team: string;
  type: string;
  message: string;
  data: JsonDefault;
  actor: string;
  source: string;
  created_at: TimestampDefault;
}

export interface IdempotencyKeysTable {
  token_id: number;
  key: string;
  request_sha256: string;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_headers: Json | null;
  response_body: Json | null;
  created_at: TimestampDefault;
}

export interface WebSessionsTable {
  id_sha256: string;
  token_id: number;
  csrf_token: string;
  created_at: TimestampDefault;
  expires_at: Timestamp;
}

/** Objects with work due at run_at (0015): written with the commands that need a drain, taken by the drain engine. */
export interface DrainWakeupsTable {
  target_kind: ObjectKind;
  target_id: number;
  run_at: TimestampDefault;
}

export interface DB {
  blueprints: BlueprintsTable;
  orphans: OrphansTable;
  resources: ResourcesTable;
  leases: LeasesTable;
  resource_slots: ResourceSlotsTable;
  blueprint_waiters: BlueprintWaitersTable;
  commands: CommandsTable;
  drain_wakeups: DrainWakeupsTable;
  events: EventsTable;
  workers: WorkersTable;
  simulated_effects: SimulatedEffectsTable;
  static_pool_claims: StaticPoolClaimsTable;
  command_callbacks: CommandCallbacksTable;
  callback_attempts: CallbackAttemptsTable;
  gc_passes: GcPassesTable;
  usage_samples: UsageSamplesTable;
  blueprint_usage_samples: BlueprintUsageSamplesTable;
  api_tokens: ApiTokensTable;
  teams: TeamsTable;
  team_usage: TeamUsageTable;
  preemptions: PreemptionsTable;
  reservations: ReservationsTable;
  quotas: QuotasTable;
  team_events: TeamEventsTable;
  idempotency_keys: IdempotencyKeysTable;
  web_sessions: WebSessionsTable;
}

export type BlueprintRow = Selectable<BlueprintsTable>;
export type ResourceRow = Selectable<ResourcesTable>;
export type LeaseRow = Selectable<LeasesTable>;
export type CommandRow = Selectable<CommandsTable>;
export type EventRow = Selectable<EventsTable>;
export type GcPassRow = Selectable<GcPassesTable>;
export type OrphanRow = Selectable<OrphansTable>;
export type NewCommand = Insertable<CommandsTable>;
export type CallbackRow = Selectable<CommandCallbacksTable>;
export type CallbackAttemptRow = Selectable<CallbackAttemptsTable>;
export type ApiTokenRow = Selectable<ApiTokensTable>;
export type TeamRow = Selectable<TeamsTable>;
export type QuotaRow = Selectable<QuotasTable>;
export type PreemptionRow = Selectable<PreemptionsTable>;
export type ReservationRow = Selectable<ReservationsTable>;
export type TeamEventRow = Selectable<TeamEventsTable>;
