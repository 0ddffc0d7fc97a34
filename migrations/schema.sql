-- Slipway's schema (`public`) after migration 0040_sooner_coalesced_commands.
-- Written by `npm run schema` (src/db/schemaDump.ts); test/db/schemaDump.test.ts
-- fails when a freshly migrated database differs. Do not edit it by hand.

create table public.api_tokens (
  id bigint not null generated always as identity,
  name text not null,
  role text not null,
  secret_sha256 text not null,
  created_by text not null,
  created_at timestamp with time zone not null default now(),
  last_used_at timestamp with time zone,
  revoked_at timestamp with time zone,
  team text not null default 'default'::text,
  constraint api_tokens_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text)),
  constraint api_tokens_name_key UNIQUE (name),
  constraint api_tokens_pkey PRIMARY KEY (id),
  constraint api_tokens_role_check CHECK ((role = ANY (ARRAY['viewer'::text, 'user'::text, 'operator'::text, 'admin'::text]))),
  constraint api_tokens_secret_sha256_key UNIQUE (secret_sha256),
  constraint api_tokens_team_fkey FOREIGN KEY (team) REFERENCES public.teams(name)
);

create table public.blueprint_usage_samples (
  pass_id bigint not null,
  blueprint_id bigint not null,
  leases jsonb not null,
  leases_waiting integer not null,
  resources jsonb not null,
  leases_activated integer,
  wait_p50_ms integer,
  wait_p95_ms integer,
  constraint blueprint_usage_samples_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id) ON DELETE CASCADE,
  constraint blueprint_usage_samples_pass_id_fkey FOREIGN KEY (pass_id) REFERENCES public.usage_samples(pass_id) ON DELETE CASCADE,
  constraint blueprint_usage_samples_pkey PRIMARY KEY (pass_id, blueprint_id)
);
CREATE INDEX blueprint_usage_samples_by_blueprint ON public.blueprint_usage_samples USING btree (blueprint_id, pass_id);

create table public.blueprint_waiters (
  lease_id bigint not null,
  blueprint_id bigint not null,
  since timestamp with time zone not null,
  created_at timestamp with time zone not null default now(),
  team text not null default 'default'::text,
  why text,
  constraint blueprint_waiters_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id),
  constraint blueprint_waiters_lease_id_fkey FOREIGN KEY (lease_id) REFERENCES public.leases(id),
  constraint blueprint_waiters_pkey PRIMARY KEY (lease_id)
);
CREATE INDEX blueprint_waiters_by_team ON public.blueprint_waiters USING btree (blueprint_id, team, since, lease_id);
CREATE INDEX blueprint_waiters_queue ON public.blueprint_waiters USING btree (blueprint_id, since, lease_id);

create table public.blueprints (
  id bigint not null generated always as identity,
  name text not null,
  driver text not null,
  settings jsonb not null default '{}'::jsonb,
  max_resources integer not null,
  leases_per_resource integer not null,
  state text not null default 'enabled'::text,
  live_resources integer not null default 0,
  version integer not null default 1,
  created_at timestamp with time zone not null default now(),
  updated_at timestamp with time zone not null default now(),
  min_resources integer not null default 0,
  idle_timeout_ms bigint,
  check_interval_ms bigint,
  clean_between_leases boolean not null default false,
  clean_attempts integer not null default 3,
  priority_step_ms bigint not null default 60000,
  labels jsonb not null default '{}'::jsonb,
  orphans text not null default 'report'::text,
  possible_labels jsonb,
  max_hold_ms bigint,
  fair_share_half_life_ms bigint not null default 3600000,
  preemption jsonb,
  reserved_until timestamp with time zone,
  constraint blueprints_check_interval_ms_check CHECK ((check_interval_ms > 0)),
  constraint blueprints_clean_attempts_check CHECK (((clean_attempts >= 1) AND (clean_attempts <= 100))),
  constraint blueprints_fair_share_half_life_ms_check CHECK (((fair_share_half_life_ms > 0) AND (fair_share_half_life_ms <= '31536000000'::bigint))),
  constraint blueprints_idle_timeout_ms_check CHECK ((idle_timeout_ms > 0)),
  constraint blueprints_leases_per_resource_check CHECK ((leases_per_resource > 0)),
  constraint blueprints_live_resources_check CHECK ((live_resources >= 0)),
  constraint blueprints_max_hold_ms_check CHECK ((max_hold_ms > 0)),
  constraint blueprints_max_resources_check CHECK ((max_resources > 0)),
  constraint blueprints_min_resources_check CHECK ((min_resources >= 0)),
  constraint blueprints_min_within_max CHECK ((min_resources <= max_resources)),
  constraint blueprints_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text)),
  constraint blueprints_name_key UNIQUE (name),
  constraint blueprints_orphans_check CHECK ((orphans = ANY (ARRAY['report'::text, 'destroy'::text]))),
  constraint blueprints_pkey PRIMARY KEY (id),
  constraint blueprints_priority_step_ms_check CHECK (((priority_step_ms >= 0) AND (priority_step_ms <= 86400000))),
  constraint blueprints_state_check CHECK ((state = ANY (ARRAY['enabled'::text, 'disabled'::text, 'archived'::text])))
);

create table public.callback_attempts (
  id bigint not null generated always as identity,
  callback_id bigint not null,
  attempt integer not null,
  started_at timestamp with time zone not null,
  finished_at timestamp with time zone not null default now(),
  status_code integer,
  error text,
  next_retry_at timestamp with time zone,
  constraint callback_attempts_attempt_check CHECK ((attempt > 0)),
  constraint callback_attempts_callback_id_attempt_key UNIQUE (callback_id, attempt),
  constraint callback_attempts_callback_id_fkey FOREIGN KEY (callback_id) REFERENCES public.command_callbacks(id) ON DELETE CASCADE,
  constraint callback_attempts_pkey PRIMARY KEY (id)
);

create table public.command_callbacks (
  id bigint not null generated always as identity,
  command_id bigint not null,
  url text not null,
  status text not null default 'waiting'::text,
  attempts integer not null default 0,
  next_attempt_at timestamp with time zone,
  created_at timestamp with time zone not null default now(),
  finished_at timestamp with time zone,
  job_queued boolean not null default true,
  constraint command_callbacks_command_id_fkey FOREIGN KEY (command_id) REFERENCES public.commands(id) ON DELETE CASCADE,
  constraint command_callbacks_command_id_url_key UNIQUE (command_id, url),
  constraint command_callbacks_pkey PRIMARY KEY (id),
  constraint command_callbacks_status_check CHECK ((status = ANY (ARRAY['waiting'::text, 'pending'::text, 'delivered'::text, 'failed'::text])))
);
CREATE INDEX command_callbacks_to_dispatch ON public.command_callbacks USING btree (id) WHERE ((status = 'pending'::text) AND (NOT job_queued));
CREATE INDEX command_callbacks_waiting ON public.command_callbacks USING btree (command_id) WHERE (status = 'waiting'::text);

create table public.commands (
  id bigint not null generated always as identity,
  target_kind text not null,
  target_id bigint not null,
  kind text not null,
  version integer not null default 1,
  payload jsonb not null default '{}'::jsonb,
  issued_by text not null,
  source text not null,
  reason text,
  request_id text,
  caused_by bigint,
  status text not null default 'queued'::text,
  message text,
  dedup_key text,
  coalesced_into bigint,
  not_before timestamp with time zone not null default now(),
  attempts integer not null default 0,
  created_at timestamp with time zone not null default now(),
  started_at timestamp with time zone,
  finished_at timestamp with time zone,
  client_address text,
  user_agent text,
  constraint commands_caused_by_fkey FOREIGN KEY (caused_by) REFERENCES public.commands(id) ON DELETE SET NULL,
  constraint commands_coalesced_into_fkey FOREIGN KEY (coalesced_into) REFERENCES public.commands(id) ON DELETE SET NULL,
  constraint commands_pkey PRIMARY KEY (id),
  constraint commands_source_check CHECK ((source = ANY (ARRAY['web'::text, 'cli'::text, 'api'::text, 'gc'::text, 'system'::text]))),
  constraint commands_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'done'::text, 'failed'::text, 'cancelled'::text, 'coalesced'::text]))),
  constraint commands_target_kind_check CHECK ((target_kind = ANY (ARRAY['blueprint'::text, 'resource'::text, 'lease'::text])))
);
ALTER TABLE public.commands ALTER COLUMN target_id SET (n_distinct=-0.05);
CREATE INDEX commands_acquires_in_flight ON public.commands USING btree (target_id) WHERE ((target_kind = 'resource'::text) AND (kind = 'acquire'::text) AND (status = ANY (ARRAY['queued'::text, 'running'::text])));
CREATE INDEX commands_by_cause ON public.commands USING btree (caused_by) WHERE (caused_by IS NOT NULL);
CREATE INDEX commands_by_coalesced_into ON public.commands USING btree (coalesced_into) WHERE (coalesced_into IS NOT NULL);
CREATE INDEX commands_by_issuer_id ON public.commands USING btree (issued_by, id);
CREATE INDEX commands_by_outside_source_id ON public.commands USING btree (source, id) WHERE (source <> 'system'::text);
CREATE INDEX commands_by_rare_status_id ON public.commands USING btree (status, id) WHERE (status <> ALL (ARRAY['queued'::text, 'running'::text, 'done'::text]));
CREATE INDEX commands_by_target ON public.commands USING btree (target_kind, target_id, id);
CREATE UNIQUE INDEX commands_one_in_flight ON public.commands USING btree (target_kind, target_id, dedup_key) WHERE ((dedup_key IS NOT NULL) AND (status = ANY (ARRAY['queued'::text, 'running'::text])));
CREATE INDEX commands_queue ON public.commands USING btree (target_kind, target_id, id) WHERE (status = ANY (ARRAY['queued'::text, 'running'::text]));
CREATE INDEX commands_running ON public.commands USING btree (target_kind, target_id, id) WHERE (status = 'running'::text);
CREATE INDEX commands_unsettled ON public.commands USING btree (not_before) WHERE ((status = ANY (ARRAY['queued'::text, 'running'::text])) AND (not_before IS NOT NULL));
CREATE CONSTRAINT TRIGGER commands_queue_settled_callbacks AFTER UPDATE OF status ON public.commands DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((old.status = ANY (ARRAY['queued'::text, 'running'::text])) AND (new.status <> ALL (ARRAY['queued'::text, 'running'::text])))) EXECUTE FUNCTION public.queue_settled_callbacks();

create table public.drain_wakeups (
  target_kind text not null,
  target_id bigint not null,
  run_at timestamp with time zone not null default now(),
  constraint drain_wakeups_pkey PRIMARY KEY (target_kind, target_id),
  constraint drain_wakeups_target_kind_check CHECK ((target_kind = ANY (ARRAY['blueprint'::text, 'resource'::text, 'lease'::text])))
);
CREATE INDEX drain_wakeups_due ON public.drain_wakeups USING btree (run_at);

create table public.events (
  id bigint not null generated always as identity,
  target_kind text not null,
  target_id bigint not null,
  command_id bigint,
  type text not null,
  from_state text,
  to_state text,
  message text not null,
  actor text not null,
  source text not null,
  data jsonb,
  created_at timestamp with time zone not null default now(),
  constraint events_command_id_fkey FOREIGN KEY (command_id) REFERENCES public.commands(id) ON DELETE SET NULL,
  constraint events_pkey PRIMARY KEY (id),
  constraint events_target_kind_check CHECK ((target_kind = ANY (ARRAY['blueprint'::text, 'resource'::text, 'lease'::text])))
);
CREATE INDEX events_by_command ON public.events USING btree (command_id) WHERE (command_id IS NOT NULL);
CREATE INDEX events_by_target ON public.events USING btree (target_kind, target_id, id);

create table public.gc_passes (
  id bigint not null generated always as identity,
  trigger text not null,
  status text not null default 'running'::text,
  started_at timestamp with time zone not null default now(),
  finished_at timestamp with time zone,
  report jsonb not null default '{}'::jsonb,
  message text,
  constraint gc_passes_pkey PRIMARY KEY (id),
  constraint gc_passes_status_check CHECK ((status = ANY (ARRAY['running'::text, 'done'::text, 'failed'::text, 'skipped'::text]))),
  constraint gc_passes_trigger_check CHECK ((trigger = ANY (ARRAY['schedule'::text, 'cli'::text])))
);
CREATE INDEX gc_passes_recent ON public.gc_passes USING btree (started_at);

create table public.idempotency_keys (
  token_id bigint not null,
  key text not null,
  request_sha256 text not null,
  state text not null,
  response_status integer,
  response_headers jsonb,
  response_body jsonb,
  created_at timestamp with time zone not null default now(),
  constraint idempotency_keys_pkey PRIMARY KEY (token_id, key),
  constraint idempotency_keys_state_check CHECK ((state = ANY (ARRAY['in_progress'::text, 'completed'::text]))),
  constraint idempotency_keys_token_id_fkey FOREIGN KEY (token_id) REFERENCES public.api_tokens(id) ON DELETE CASCADE
);
CREATE INDEX idempotency_keys_by_age ON public.idempotency_keys USING btree (created_at);

create table public.leases (
  id bigint not null generated always as identity,
  blueprint_id bigint not null,
  holder text not null,
  state text not null default 'pending'::text,
  resource_id bigint,
  slot integer,
  attributes jsonb not null default '{}'::jsonb,
  expires_at timestamp with time zone,
  message text,
  version integer not null default 1,
  created_at timestamp with time zone not null default now(),
  updated_at timestamp with time zone not null default now(),
  term_ms bigint,
  heartbeat_ms integer,
  heartbeat_deadline timestamp with time zone,
  callback_url text,
  wait_deadline timestamp with time zone,
  priority smallint not null default 0,
  team text not null default 'default'::text,
  selector text,
  granted_at timestamp with time zone,
  end_by timestamp with time zone,
  end_notice_at timestamp with time zone,
  ending jsonb,
  preemptible boolean not null default true,
  reservation_id bigint,
  reservation_ends_at timestamp with time zone,
  constraint leases_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id),
  constraint leases_heartbeat_ms_check CHECK ((heartbeat_ms > 0)),
  constraint leases_pkey PRIMARY KEY (id),
  constraint leases_priority_check CHECK (((priority >= 0) AND (priority <= 9))),
  constraint leases_reservation_id_fkey FOREIGN KEY (reservation_id) REFERENCES public.reservations(id) ON DELETE SET NULL,
  constraint leases_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id),
  constraint leases_selector_check CHECK ((length(selector) <= 1000)),
  constraint leases_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'acquired'::text, 'active'::text, 'released'::text, 'broken'::text, 'destroyed'::text]))),
  constraint leases_team_fkey FOREIGN KEY (team) REFERENCES public.teams(name),
  constraint leases_term_ms_check CHECK ((term_ms > 0))
);
CREATE INDEX leases_by_blueprint_id ON public.leases USING btree (blueprint_id, id);
CREATE INDEX leases_by_blueprint_state ON public.leases USING btree (blueprint_id, state);
CREATE INDEX leases_by_holder_id ON public.leases USING btree (holder, id);
CREATE INDEX leases_by_reservation ON public.leases USING btree (reservation_id) WHERE (reservation_id IS NOT NULL);
CREATE INDEX leases_by_resource ON public.leases USING btree (resource_id) WHERE (resource_id IS NOT NULL);
CREATE INDEX leases_by_state_id ON public.leases USING btree (state, id);
CREATE INDEX leases_destroyed ON public.leases USING btree (updated_at) WHERE (state = 'destroyed'::text);
CREATE INDEX leases_end_due ON public.leases USING btree (end_by) WHERE ((end_by IS NOT NULL) AND (state = ANY (ARRAY['pending'::text, 'acquired'::text, 'active'::text])));
CREATE INDEX leases_end_notice_due ON public.leases USING btree (end_notice_at) WHERE ((end_notice_at IS NOT NULL) AND (state = ANY (ARRAY['pending'::text, 'acquired'::text, 'active'::text])));
CREATE INDEX leases_expiring ON public.leases USING btree (expires_at) WHERE ((expires_at IS NOT NULL) AND (state = ANY (ARRAY['pending'::text, 'acquired'::text, 'active'::text])));
CREATE INDEX leases_heartbeat_due ON public.leases USING btree (heartbeat_deadline) WHERE ((heartbeat_deadline IS NOT NULL) AND (state = ANY (ARRAY['pending'::text, 'acquired'::text, 'active'::text])));
CREATE INDEX leases_reclaimed ON public.leases USING btree (blueprint_id) WHERE ((ending ->> 'kind'::text) = 'reclaimed'::text);
CREATE INDEX leases_wait_due ON public.leases USING btree (wait_deadline) WHERE ((wait_deadline IS NOT NULL) AND (state = ANY (ARRAY['pending'::text, 'acquired'::text])));

create table public.orphans (
  blueprint_id bigint not null,
  external_id text not null,
  resource_id bigint,
  attributes jsonb not null default '{}'::jsonb,
  first_seen_at timestamp with time zone not null default now(),
  last_seen_at timestamp with time zone not null default now(),
  passes integer not null default 1,
  slot integer,
  constraint orphans_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id),
  constraint orphans_passes_check CHECK ((passes > 0)),
  constraint orphans_pkey PRIMARY KEY (blueprint_id, external_id),
  constraint orphans_slot_check CHECK ((slot >= 0)),
  constraint orphans_slot_on_a_resource CHECK (((slot IS NULL) OR (resource_id IS NOT NULL)))
);

create table public.preemptions (
  victim_lease_id bigint not null,
  blueprint_id bigint not null,
  for_lease_id bigint not null,
  resource_id bigint not null,
  created_at timestamp with time zone not null default now(),
  ends_by timestamp with time zone not null,
  reason text not null,
  constraint preemptions_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id) ON DELETE CASCADE,
  constraint preemptions_for_lease_id_fkey FOREIGN KEY (for_lease_id) REFERENCES public.leases(id) ON DELETE CASCADE,
  constraint preemptions_pkey PRIMARY KEY (victim_lease_id),
  constraint preemptions_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id) ON DELETE CASCADE,
  constraint preemptions_victim_lease_id_fkey FOREIGN KEY (victim_lease_id) REFERENCES public.leases(id) ON DELETE CASCADE
);
CREATE INDEX preemptions_by_blueprint ON public.preemptions USING btree (blueprint_id);
CREATE INDEX preemptions_by_for_lease ON public.preemptions USING btree (for_lease_id);

create table public.quotas (
  id bigint not null generated always as identity,
  team text not null,
  holder text,
  blueprint_id bigint,
  max_leases integer not null,
  created_by text not null,
  created_at timestamp with time zone not null default now(),
  updated_at timestamp with time zone not null default now(),
  constraint quotas_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id) ON DELETE CASCADE,
  constraint quotas_holder_check CHECK (((length(holder) >= 1) AND (length(holder) <= 200))),
  constraint quotas_max_leases_check CHECK (((max_leases >= 0) AND (max_leases <= 100000))),
  constraint quotas_pkey PRIMARY KEY (id),
  constraint quotas_team_fkey FOREIGN KEY (team) REFERENCES public.teams(name)
);
CREATE UNIQUE INDEX quotas_one_per_scope ON public.quotas USING btree (team, COALESCE(holder, ''::text), COALESCE(blueprint_id, (0)::bigint));

create table public.reservations (
  id bigint not null generated always as identity,
  blueprint_id bigint not null,
  slots integer not null,
  starts_at timestamp with time zone not null,
  ends_at timestamp with time zone not null,
  team text,
  holders text[],
  hand_back_after_ms bigint,
  created_by text not null,
  created_source text not null,
  reason text,
  created_at timestamp with time zone not null default now(),
  cancelled_at timestamp with time zone,
  cancelled_by text,
  cancelled_source text,
  cancel_reason text,
  constraint reservations_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id) ON DELETE CASCADE,
  constraint reservations_check CHECK ((starts_at < ends_at)),
  constraint reservations_hand_back_after_ms_check CHECK ((hand_back_after_ms > 0)),
  constraint reservations_pkey PRIMARY KEY (id),
  constraint reservations_slots_check CHECK ((slots > 0)),
  constraint reservations_team_fkey FOREIGN KEY (team) REFERENCES public.teams(name)
);
CREATE INDEX reservations_by_blueprint ON public.reservations USING btree (blueprint_id, ends_at) WHERE (cancelled_at IS NULL);

create table public.resource_slots (
  resource_id bigint not null,
  slot integer not null,
  lease_id bigint,
  granted_at timestamp with time zone not null default now(),
  constraint resource_slots_lease_id_fkey FOREIGN KEY (lease_id) REFERENCES public.leases(id),
  constraint resource_slots_lease_id_key UNIQUE (lease_id),
  constraint resource_slots_pkey PRIMARY KEY (resource_id, slot),
  constraint resource_slots_resource_id_fkey FOREIGN KEY (resource_id) REFERENCES public.resources(id),
  constraint resource_slots_slot_check CHECK ((slot >= 0))
);

create table public.resources (
  id bigint not null generated always as identity,
  blueprint_id bigint not null,
  state text not null default 'pending'::text,
  capacity integer not null,
  used_slots integer not null default 0,
  allocated_for_lease_id bigint,
  attributes jsonb not null default '{}'::jsonb,
  message text,
  version integer not null default 1,
  created_at timestamp with time zone not null default now(),
  updated_at timestamp with time zone not null default now(),
  idle_since timestamp with time zone,
  health text,
  health_message text,
  checked_at timestamp with time zone,
  labels jsonb not null default '{}'::jsonb,
  selector text,
  constraint resources_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id),
  constraint resources_capacity_check CHECK ((capacity > 0)),
  constraint resources_check CHECK (((used_slots >= 0) AND (used_slots <= capacity))),
  constraint resources_health_check CHECK ((health = ANY (ARRAY['healthy'::text, 'unhealthy'::text, 'gone'::text]))),
  constraint resources_pkey PRIMARY KEY (id),
  constraint resources_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'active'::text, 'maintenance'::text, 'quarantined'::text, 'released'::text, 'broken'::text, 'destroyed'::text])))
);
CREATE INDEX resources_by_blueprint_id ON public.resources USING btree (blueprint_id, id);
CREATE INDEX resources_by_blueprint_state ON public.resources USING btree (blueprint_id, state);
CREATE INDEX resources_by_selector ON public.resources USING btree (blueprint_id, selector) WHERE (selector IS NOT NULL);
CREATE INDEX resources_by_state_id ON public.resources USING btree (state, id);
CREATE INDEX resources_check_due ON public.resources USING btree (blueprint_id, COALESCE(checked_at, '-infinity'::timestamp with time zone)) WHERE (state = ANY (ARRAY['active'::text, 'maintenance'::text, 'quarantined'::text]));
CREATE INDEX resources_destroyed ON public.resources USING btree (updated_at) WHERE (state = 'destroyed'::text);
CREATE INDEX resources_idle ON public.resources USING btree (blueprint_id, idle_since) WHERE ((state = 'active'::text) AND (used_slots = 0));
CREATE UNIQUE INDEX resources_one_per_lease ON public.resources USING btree (allocated_for_lease_id) WHERE (state = ANY (ARRAY['pending'::text, 'active'::text]));

create table public.simulated_effects (
  operation text not null,
  object_id bigint not null,
  idempotency_key text not null,
  calls integer not null default 1,
  first_at timestamp with time zone not null default now(),
  last_at timestamp with time zone not null default now(),
  constraint simulated_effects_pkey PRIMARY KEY (operation, object_id, idempotency_key)
);

create table public.static_pool_claims (
  blueprint_id bigint not null,
  entry text not null,
  resource_id bigint not null,
  definition jsonb not null,
  claimed_at timestamp with time zone not null default now(),
  constraint static_pool_claims_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id),
  constraint static_pool_claims_pkey PRIMARY KEY (blueprint_id, entry),
  constraint static_pool_claims_resource_id_key UNIQUE (resource_id)
);

create table public.team_events (
  id bigint not null generated always as identity,
  team text not null,
  type text not null,
  message text not null,
  data jsonb not null default '{}'::jsonb,
  actor text not null,
  source text not null,
  created_at timestamp with time zone not null default now(),
  constraint team_events_pkey PRIMARY KEY (id),
  constraint team_events_team_fkey FOREIGN KEY (team) REFERENCES public.teams(name)
);
CREATE INDEX team_events_by_team ON public.team_events USING btree (team, id);

create table public.team_usage (
  blueprint_id bigint not null,
  team text not null,
  slot_seconds double precision not null,
  grants double precision not null,
  held integer,
  at timestamp with time zone not null,
  constraint team_usage_blueprint_id_fkey FOREIGN KEY (blueprint_id) REFERENCES public.blueprints(id) ON DELETE CASCADE,
  constraint team_usage_grants_check CHECK ((grants >= (0)::double precision)),
  constraint team_usage_held_check CHECK ((held >= 0)),
  constraint team_usage_pkey PRIMARY KEY (blueprint_id, team),
  constraint team_usage_slot_seconds_check CHECK ((slot_seconds >= (0)::double precision)),
  constraint team_usage_team_fkey FOREIGN KEY (team) REFERENCES public.teams(name)
);

create table public.teams (
  name text not null,
  weight integer not null default 1,
  created_by text not null,
  created_at timestamp with time zone not null default now(),
  updated_at timestamp with time zone not null default now(),
  constraint teams_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text)),
  constraint teams_pkey PRIMARY KEY (name),
  constraint teams_weight_check CHECK (((weight >= 1) AND (weight <= 1000)))
);

create table public.usage_samples (
  pass_id bigint not null,
  sampled_at timestamp with time zone not null default now(),
  last_command_id bigint not null,
  last_event_id bigint not null,
  commands_appended integer,
  commands_failed integer,
  leases_activated integer,
  wait_p50_ms integer,
  wait_p95_ms integer,
  constraint usage_samples_pass_id_fkey FOREIGN KEY (pass_id) REFERENCES public.gc_passes(id) ON DELETE CASCADE,
  constraint usage_samples_pkey PRIMARY KEY (pass_id)
);
CREATE INDEX usage_samples_recent ON public.usage_samples USING btree (sampled_at);

create table public.web_sessions (
  id_sha256 text not null,
  token_id bigint not null,
  csrf_token text not null,
  created_at timestamp with time zone not null default now(),
  expires_at timestamp with time zone not null,
  constraint web_sessions_pkey PRIMARY KEY (id_sha256),
  constraint web_sessions_token_id_fkey FOREIGN KEY (token_id) REFERENCES public.api_tokens(id) ON DELETE CASCADE
);
CREATE INDEX web_sessions_by_expiry ON public.web_sessions USING btree (expires_at);

create table public.workers (
  id text not null,
  hostname text not null,
  pid integer not null,
  handles jsonb not null,
  started_at timestamp with time zone not null default now(),
  heartbeat_at timestamp with time zone not null default now(),
  job_lockers text[] not null default '{}'::text[],
  version text,
  constraint workers_pkey PRIMARY KEY (id)
);

create sequence public.api_tokens_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.api_tokens.id (identity);
create sequence public.blueprints_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.blueprints.id (identity);
create sequence public.callback_attempts_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.callback_attempts.id (identity);
create sequence public.command_callbacks_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.command_callbacks.id (identity);
create sequence public.commands_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.commands.id (identity);
create sequence public.events_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.events.id (identity);
create sequence public.gc_passes_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.gc_passes.id (identity);
create sequence public.leases_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.leases.id (identity);
create sequence public.quotas_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.quotas.id (identity);
create sequence public.reservations_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.reservations.id (identity);
create sequence public.resources_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.resources.id (identity);
create sequence public.team_events_id_seq as bigint increment 1 minvalue 1 maxvalue 9223372036854775807 start 1 cache 1 owned by public.team_events.id (identity);

CREATE OR REPLACE FUNCTION public.command_ancestry_ids(leaf bigint)
 RETURNS SETOF bigint
 LANGUAGE sql
 STABLE STRICT
AS $function$
        with recursive up (id, caused_by) as (
          select id, caused_by from commands where id = leaf
          union all
          select c.id, c.caused_by from commands c join up on c.id = up.caused_by
        )
        select id from up
      $function$;

CREATE OR REPLACE FUNCTION public.command_tree_ids(root bigint)
 RETURNS SETOF bigint
 LANGUAGE sql
 STABLE STRICT
AS $function$
        with recursive tree (id) as (
          select root
          union all
          select c.id from commands c join tree on c.caused_by = tree.id
        )
        select id from tree
      $function$;

CREATE OR REPLACE FUNCTION public.object_drain_job_key(kind text, id bigint)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$ select 'drain:' || kind || ':' || id::text $function$;

CREATE OR REPLACE FUNCTION public.object_lock_key(kind text, id bigint)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
        select (x'534c'::bigint << 48)
             | ((case kind when 'blueprint' then 1 when 'resource' then 2 when 'lease' then 3 end)::bigint << 40)
             | id
      $function$;

CREATE OR REPLACE FUNCTION public.queue_callback_delivery(callback_id bigint, run_at timestamp with time zone DEFAULT now())
 RETURNS void
 LANGUAGE sql
AS $function$
        update command_callbacks set status = 'pending', next_attempt_at = run_at, job_queued = false where id = callback_id
      $function$;

CREATE OR REPLACE FUNCTION public.queue_settled_callbacks()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
      declare
        waiting record;
      begin
        if not exists (select 1 from command_callbacks where status = 'waiting') then
          return null;
        end if;
        for waiting in
          select cb.id, cb.command_id from command_callbacks cb
          where cb.status = 'waiting' and cb.command_id in (select command_ancestry_ids(new.id))
          order by cb.id
          for update
        loop
          if not exists (
            select 1 from commands c
            where c.id in (select command_tree_ids(waiting.command_id)) and c.status in ('queued', 'running')
          ) then
            perform queue_callback_delivery(waiting.id);
          end if;
        end loop;
        return null;
      end
      $function$;

CREATE OR REPLACE FUNCTION public.slipway_append_command(p_target_kind text, p_target_id bigint, p_accepted_states text[], p_kind text, p_version integer, p_payload jsonb, p_issued_by text, p_source text, p_reason text, p_request_id text, p_client_address text, p_user_agent text, p_caused_by bigint, p_dedup_key text, p_not_before timestamp with time zone, p_wake_task text)
 RETURNS TABLE(part text, object_state text, cmd public.commands)
 LANGUAGE plpgsql
AS $function$
      declare
        v_state text;
        v_new commands;
        v_existing commands;
      begin
        if p_accepted_states is not null then
          -- FOR SHARE: a drain locks the row before it commits a state
          -- change (src/drain/sql/lockVersions.ts), so the state read here
          -- stays the state until this append commits.
          case p_target_kind
            when 'lease' then select o.state into v_state from leases o where o.id = p_target_id for share;
            when 'resource' then select o.state into v_state from resources o where o.id = p_target_id for share;
            else select o.state into v_state from blueprints o where o.id = p_target_id for share;
          end case;
          if v_state is null then
            return query select 'missing'::text, null::text, null::commands;
            return;
          end if;
          if not (v_state = any(p_accepted_states)) then
            return query select 'rejected'::text, v_state, null::commands;
            return;
          end if;
        end if;
        -- Loop: the in-flight command we collided with may settle before we
        -- read it, in which case our insert goes through on the next try.
        loop
          insert into commands (target_kind, target_id, kind, version, payload, issued_by, source, reason,
                                request_id, client_address, user_agent, caused_by, dedup_key, not_before)
          values (p_target_kind, p_target_id, p_kind, p_version, p_payload, p_issued_by, p_source, p_reason,
                  p_request_id, p_client_address, p_user_agent, p_caused_by, p_dedup_key, coalesce(p_not_before, now()))
          on conflict (target_kind, target_id, dedup_key)
            where dedup_key is not null and status in ('queued', 'running')
            do nothing
          returning * into v_new;
          if found then
            -- slipway_wake_objects for one object (see above).
            if p_wake_task is not null then
              insert into drain_wakeups as w (target_kind, target_id, run_at)
              values (p_target_kind, p_target_id, coalesce(p_not_before, now()))
              on conflict (target_kind, target_id) do update set run_at = excluded.run_at where w.run_at > excluded.run_at;
            end if;
            return query select 'inserted'::text, v_state, v_new;
            return;
          end if;
          select * into v_existing from commands c
          where c.target_kind = p_target_kind and c.target_id = p_target_id
            and c.dedup_key = p_dedup_key and c.status in ('queued', 'running');
          if found then
            -- Asked for sooner than it is queued for: it runs at the sooner time.
            if v_existing.status = 'queued' and v_existing.not_before > coalesce(p_not_before, now()) then
              update commands c set not_before = coalesce(p_not_before, now())
              where c.id = v_existing.id and c.status = 'queued';
              if p_wake_task is not null then
                insert into drain_wakeups as w (target_kind, target_id, run_at)
                values (p_target_kind, p_target_id, coalesce(p_not_before, now()))
                on conflict (target_kind, target_id) do update set run_at = excluded.run_at where w.run_at > excluded.run_at;
              end if;
            end if;
            insert into commands (target_kind, target_id, kind, version, payload, issued_by, source, reason,
                                  request_id, client_address, user_agent, caused_by, dedup_key, not_before,
                                  status, coalesced_into, message, finished_at)
            values (p_target_kind, p_target_id, p_kind, p_version, p_payload, p_issued_by, p_source, p_reason,
                    p_request_id, p_client_address, p_user_agent, p_caused_by, null, coalesce(p_not_before, now()),
                    'coalesced', v_existing.id,
                    format('coalesced into command %s, already %s', v_existing.id, v_existing.status), now())
            returning * into v_new;
            return query select 'coalesced_into'::text, v_state, v_existing
                         union all select 'coalesced'::text, v_state, v_new;
            return;
          end if;
        end loop;
      end
      $function$;

CREATE OR REPLACE FUNCTION public.slipway_append_within(p_queue_limit integer, p_target_kind text, p_target_id bigint, p_accepted_states text[], p_kind text, p_version integer, p_payload jsonb, p_issued_by text, p_source text, p_reason text, p_request_id text, p_client_address text, p_user_agent text, p_caused_by bigint, p_dedup_key text, p_not_before timestamp with time zone, p_wake_task text)
 RETURNS TABLE(part text, object_state text, cmd public.commands)
 LANGUAGE plpgsql
AS $function$
      begin
        if (select count(*) from (
              select 1 from commands c
              where c.target_kind = p_target_kind and c.target_id = p_target_id and c.status in ('queued', 'running')
              limit p_queue_limit) as queue) >= p_queue_limit then
          return query select 'busy'::text, null::text, null::commands;
          return;
        end if;
        return query select * from slipway_append_command(
          p_target_kind, p_target_id, p_accepted_states, p_kind, p_version, p_payload,
          p_issued_by, p_source, p_reason, p_request_id, p_client_address, p_user_agent,
          p_caused_by, p_dedup_key, p_not_before, p_wake_task);
      end
      $function$;

CREATE OR REPLACE FUNCTION public.slipway_dispatch_callbacks()
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
      declare
        v record;
        v_queued integer := 0;
      begin
        for v in
          update command_callbacks c set job_queued = true
          where c.id in (
            select d.id from command_callbacks d
            where d.status = 'pending' and not d.job_queued
            order by d.id
            for update skip locked
          )
          returning c.id, c.next_attempt_at
        loop
          perform graphile_worker.add_job(
            identifier := 'deliver_callback',
            payload := json_build_object('id', v.id),
            run_at := v.next_attempt_at,
            job_key := 'callback:' || v.id
          );
          v_queued := v_queued + 1;
        end loop;
        return v_queued;
      end
      $function$;

CREATE OR REPLACE FUNCTION public.slipway_drain_claim(p_room integer, p_want_kinds text[], p_want_ids bigint[], p_only_wanted boolean, p_held_kinds text[], p_held_ids bigint[], p_preempting text[], p_channel text)
 RETURNS SETOF public.commands
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
      declare
        v_kinds text[];
        v_ids bigint[];
      begin
        with wanted as (
          select w.target_kind, w.target_id, w.run_at
          from unnest(p_want_kinds, p_want_ids) as u(kind, id)
          join drain_wakeups w on w.target_kind = u.kind and w.target_id = u.id
          where p_room > 0 and w.run_at <= now()
          for update of w skip locked
        ),
        oldest as (
          select w.target_kind, w.target_id, w.run_at from drain_wakeups w
          where not p_only_wanted and w.run_at <= now()
          order by w.run_at
          limit p_room
          for update skip locked
        ),
        due as (
          select d.target_kind, d.target_id from (
            select wt.target_kind, wt.target_id, 0 as rank, wt.run_at from wanted wt
            union all
            select o.target_kind, o.target_id, 1, o.run_at from oldest o
          ) as d
          group by d.target_kind, d.target_id
          order by min(d.rank), min(d.run_at)
          limit p_room
        ),
        taken as (
          delete from drain_wakeups w using due d
          where w.target_kind = d.target_kind and w.target_id = d.target_id
          returning w.target_kind, w.target_id
        ),
        locked as (
          select t.target_kind, t.target_id from taken t
          where case
            when exists (select 1 from unnest(p_held_kinds, p_held_ids) as h(kind, id) where h.kind = t.target_kind and h.id = t.target_id) then false
            else pg_try_advisory_lock(object_lock_key(t.target_kind, t.target_id))
          end
        )
        select array_agg(l.target_kind), array_agg(l.target_id) into v_kinds, v_ids from locked l;
        if exists (
          select 1 from drain_wakeups w join unnest(p_want_kinds, p_want_ids) as u(kind, id)
            on w.target_kind = u.kind and w.target_id = u.id
          where w.run_at <= now()
        ) then
          perform pg_notify(p_channel, '');
        end if;
        if v_kinds is not null then
          return query select * from slipway_drain_heads(v_kinds, v_ids, p_preempting);
        end if;
      end
      $function$;

CREATE OR REPLACE FUNCTION public.slipway_drain_heads(p_kinds text[], p_ids bigint[], p_preempting text[])
 RETURNS SETOF public.commands
 LANGUAGE sql
AS $function$ select * from slipway_drain_runs(p_kinds, p_ids, p_preempting, 1) $function$;

CREATE OR REPLACE FUNCTION public.slipway_drain_runs(p_kinds text[], p_ids bigint[], p_preempting text[], p_length integer)
 RETURNS SETOF public.commands
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
AS $function$
      declare
        v_runs commands[];
        -- The object kinds that have preempting commands ("<kind>.<command kind>").
        v_preempting_kinds text[] := array(select distinct split_part(p, '.', 1) from unnest(p_preempting) as p);
      begin
        v_runs := array(
          select r.cmd from unnest(p_kinds, p_ids) with ordinality as o(kind, id, n)
          cross join lateral (
            select q.cmd, q.rank from (
              (select c as cmd, case when c.target_kind || '.' || c.kind = any(p_preempting) then 0 else 1 end as rank, c.id
                from commands c
                where c.target_kind = o.kind and c.target_id = o.id and c.status = 'running'
                order by 2, c.id limit p_length)
              union all
              (select c, 2, c.id from commands c
                where o.kind = any(v_preempting_kinds)
                  and c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running') and c.status <> 'running'
                  and (c.not_before <= now()) is true and c.target_kind || '.' || c.kind = any(p_preempting)
                order by c.id limit p_length)
              union all
              (select c, 3, c.id from commands c
                where c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running') and c.status <> 'running'
                  and (c.not_before <= now()) is true and not coalesce(c.target_kind || '.' || c.kind = any(p_preempting), false)
                order by c.id limit p_length)
            ) as q
            order by q.rank, q.id
            limit p_length
          ) as r
          order by o.n, r.rank, (r.cmd).id
        );
        return query select * from unnest(v_runs);
        perform pg_advisory_unlock(object_lock_key(o.kind, o.id))
        from unnest(p_kinds, p_ids) as o(kind, id)
        where not exists (select 1 from unnest(v_runs) h where h.target_kind = o.kind and h.target_id = o.id);
        perform slipway_wake_objects(null, array_agg(d.kind), array_agg(d.id), array_agg(d.due))
        from (
          select c.target_kind as kind, c.target_id as id, min(c.not_before) as due
          from unnest(p_kinds, p_ids) as o(kind, id)
          join commands c on c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running')
          where not exists (select 1 from unnest(v_runs) h where h.target_kind = o.kind and h.target_id = o.id)
          group by c.target_kind, c.target_id
        ) as d
        having count(*) > 0;
      end
      $function$;

CREATE OR REPLACE FUNCTION public.slipway_expect(ok boolean, sqlstate text, message text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
      begin
        if ok is not true then
          raise exception using errcode = sqlstate, message = message;
        end if;
        return true;
      end
      $function$;

CREATE OR REPLACE FUNCTION public.slipway_settle_commands(p_settles jsonb, p_events jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
      declare
        -- The ids as an array too, so the generic plan finds the commands
        -- by their key: joined only to the document, it may hash the table.
        v_ids bigint[] := array(select (s.doc->>'id')::bigint from jsonb_array_elements(p_settles) as s(doc));
        v_cancel bigint[];
        v_cancel_messages text[];
      begin
        if jsonb_array_length(p_events) > 0 then
          insert into events (target_kind, target_id, command_id, type, from_state, to_state, message, actor, source, data)
          select e.doc->>'target_kind', (e.doc->>'target_id')::bigint, (e.doc->>'command_id')::bigint, e.doc->>'type',
                 e.doc->>'from_state', e.doc->>'to_state', e.doc->>'message', e.doc->>'actor', e.doc->>'source',
                 nullif(e.doc->'data', 'null'::jsonb)
          from jsonb_array_elements(p_events) with ordinality as e(doc, n)
          order by e.n;
        end if;
        -- Each settled object's own queue, one index probe per object:
        -- OFFSET 0 keeps the planner from flattening the lateral subquery
        -- into the join it would hash over the whole queue again.
        select array_agg(q.id), array_agg(s.supersede_message) into v_cancel, v_cancel_messages
        from jsonb_to_recordset(p_settles) as s(id bigint, target_kind text, target_id bigint, supersedes text[], supersede_message text)
        cross join lateral (
          select c.id from commands c
          where c.target_kind = s.target_kind and c.target_id = s.target_id
            and c.status = 'queued' and c.kind = any(s.supersedes) and c.id <> s.id
          offset 0
        ) as q
        where cardinality(s.supersedes) > 0;
        if v_cancel is not null then
          update commands c set status = 'cancelled', finished_at = now(), message = u.message
          from unnest(v_cancel, v_cancel_messages) as u(id, message)
          where c.id = any(v_cancel) and c.id = u.id;
        end if;
        update commands c
        set status = case when s.status = 'yield' then 'queued' else s.status end,
            message = s.message,
            attempts = c.attempts + (s.status = 'yield')::int,
            not_before = case when s.status = 'yield' then now() + make_interval(secs => s.retry_secs) else c.not_before end,
            finished_at = case when s.status = 'yield' then c.finished_at else now() end,
            started_at = case when s.status = 'yield' then c.started_at else coalesce(c.started_at, now()) end
        from jsonb_to_recordset(p_settles) as s(id bigint, status text, message text, retry_secs float8)
        where c.id = any(v_ids) and c.id = s.id;
      end
      $function$;

CREATE OR REPLACE FUNCTION public.slipway_wake_objects(tasks text[], kinds text[], ids bigint[], run_ats timestamp with time zone[])
 RETURNS void
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
      begin
        insert into drain_wakeups as w (target_kind, target_id, run_at)
        select u.kind, u.id, min(coalesce(u.run_at, now()))
        from unnest(kinds, ids, run_ats) as u(kind, id, run_at)
        group by u.kind, u.id
        order by object_drain_job_key(u.kind, u.id)
        on conflict (target_kind, target_id) do update set run_at = excluded.run_at where w.run_at > excluded.run_at;
      end
      $function$;
