import client from 'prom-client';
import type { BlueprintRow, CommandRow, CommandSource, CommandStatus, LeaseRow, ObjectKind, ResourceRow } from '../../migrations/schema.ts';
import { ENDINGS, EndingSchema } from '../domain/ending.ts';
import { holdsSlot, READY_STATE } from '../domain/lifecycle.ts';

/**
 * Every Prometheus metric family of a Slipway process, in one registry (see
 * docs/metrics.md). A metric is counted by the process that does the work
 * (the API counts its requests, a worker its drains and driver calls), so
 * nothing is counted twice across processes; `slipway start` is one process
 * and serves one registry. Labels are kinds, names and outcomes, never object
 * ids: their number stays small whatever the traffic.
 *
 * The gauges read from the database are set at scrape time (stateGauges.ts).
 * prom-client's default metrics (process CPU, memory, file descriptors, GC,
 * event-loop lag) carry the same `slipway_` prefix.
 */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'slipway_' });

/** Durations from a millisecond to a few minutes: drains, driver calls and queue waits all fall in here. */
const SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
  new client.Counter<L>({ name, help, labelNames, registers: [registry] });
const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets = SECONDS) =>
  new client.Histogram<L>({ name, help, labelNames, buckets, registers: [registry] });
const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
  new client.Gauge<L>({ name, help, labelNames, registers: [registry] });

const commandsAppended = counter(
  'slipway_commands_appended_total',
  'Commands appended to object queues, by object kind (lease, resource, blueprint), command kind and source (api, web, cli, gc, system for follow-ups).',
  ['object', 'kind', 'source'],
);
const commandsSettled = counter(
  'slipway_commands_settled_total',
  'Commands a drain settled, by object kind, command kind and status (done or failed).',
  ['object', 'kind', 'status'],
);
const commandsYielded = counter(
  'slipway_commands_yielded_total',
  'Commands a drain left queued to be retried later (a transient driver failure), by object kind and command kind.',
  ['object', 'kind'],
);
const commandQueued = histogram(
  'slipway_command_queued_seconds',
  'Time a settled command waited, from when it was due (appended, or its not-before) until its drain took it up, by object kind and command kind.',
  ['object', 'kind'],
);
const commandRunning = histogram(
  'slipway_command_running_seconds',
  'Time from a drain taking a command up until its outcome was committed (its driver call included), by object kind and command kind.',
  ['object', 'kind'],
);
const commandTotal = histogram(
  'slipway_command_settle_seconds',
  'Time from appending a command until its outcome was committed, by object kind and command kind.',
  ['object', 'kind'],
);
/** A lease may wait for a slot for as long as its blueprint is full: the buckets go on to an hour. */
const LEASE_WAIT_SECONDS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
const leaseWait = histogram(
  'slipway_lease_wait_seconds',
  "Time from a lease's creation until it became active (its wait for a slot and its driver's activation), by blueprint name.",
  ['blueprint'],
  LEASE_WAIT_SECONDS,
);
const preemptions = counter(
  'slipway_preemptions_total',
  "Preemptions a blueprint's decisions committed, by blueprint name and event: made (a victim chosen and told), withdrawn (the lease it was for left the line or got a slot elsewhere, or the blueprint preempts no more: the victim told), taken_over (a victim whose preemption was withdrawn, chosen in the same decision for another waiting lease: it keeps the end it was told of).",
  ['blueprint', 'event'],
);
const endings = counter(
  'slipway_lease_endings_total',
  "Leases that ended while told of their end ahead (their `ending`), by blueprint name, the ending's kind (preempted, time_limit) and who ended them: the system part the kind names (system:preemption at the grace period's end, system:deadline at the longest hold), holder (released by its holder first), other (anyone else: an operator, an expiry, its resource gone).",
  ['blueprint', 'kind', 'ended_by'],
);
const drainBatchSize = histogram(
  'slipway_drain_batch_commands',
  'Commands committed together by one step of a batched drain.',
  [],
  [1, 2, 5, 10, 20, 50, 100, 200, 500],
);

const driverCalls = counter('slipway_driver_calls_total', 'Driver calls, by driver, operation and outcome (ok, transient, permanent).', [
  'driver',
  'operation',
  'outcome',
]);
const driverSeconds = histogram('slipway_driver_call_seconds', 'Duration of driver calls, by driver and operation.', ['driver', 'operation']);

const httpRequests = counter(
  'slipway_http_requests_total',
  'HTTP requests answered, by route (its URL pattern, e.g. /v1/leases/:id) and status code.',
  ['method', 'route', 'status'],
);
const httpSeconds = histogram('slipway_http_request_seconds', 'Time to answer HTTP requests, by route (its URL pattern).', ['method', 'route']);

const sweeperWakes = counter(
  'slipway_sweeper_wakes_total',
  'Objects the sweeper woke because nobody was draining them although they had commands due.',
  [],
);
const callbackDeliveries = counter(
  'slipway_callback_deliveries_total',
  'Callback delivery attempts, by outcome (delivered, retry, failed: given up).',
  ['outcome'],
);
const collectorPasses = counter('slipway_collector_passes_total', 'Collector passes, by status (done, failed, skipped: another pass was running).', [
  'status',
]);
const collectorActions = counter('slipway_collector_actions_total', 'What collector passes did, by step (e.g. expireLeases, reclaimIdleResources).', [
  'step',
]);

const tablesMaintained = counter(
  'slipway_tables_maintained_total',
  'Vacuums and analyzes collector passes ran on the tables autovacuum does not look after, by table and maintenance (vacuum, analyze).',
  ['table', 'maintenance'],
);

const poolConnections = gauge(
  'slipway_pg_pool_connections',
  "The process's PostgreSQL pool: connections open in all (total), idle, and requests waiting for one (waiting).",
  ['state'],
);
const backlog = gauge('slipway_commands_backlog', 'Unsettled commands in the database: queued and due, scheduled (queued, due later), running.', [
  'state',
]);
const overdue = gauge(
  'slipway_commands_overdue',
  'Commands queued and due for longer than SLIPWAY_STALE_AFTER_MS, or running for longer than that since they started: what the sweeper wakes.',
  [],
);
const leases = gauge('slipway_leases', 'Leases in the database that are not destroyed, by blueprint name and state.', ['blueprint', 'state']);
const resources = gauge('slipway_resources', 'Resources in the database that are not destroyed, by blueprint name and state.', [
  'blueprint',
  'state',
]);
const waitingLeases = gauge('slipway_waiting_leases', 'Leases waiting for a slot at their blueprint, by blueprint name.', ['blueprint']);
const orphans = gauge(
  'slipway_orphans',
  "Things a blueprint's driver lists that no resource stands for, and slots on its live resources that no lease holds, as the collector's last pass recorded them, by blueprint name and seen: once (first found by the last pass) or again (found in two passes or more in a row).",
  ['blueprint', 'seen'],
);
const liveWorkers = gauge('slipway_live_workers', 'Workers whose last heartbeat is at most 3 heartbeat intervals (SLIPWAY_HEARTBEAT_MS) old.', []);

/** The database-wide gauges, as one query read them (stateGauges.ts). */
export interface StateSnapshot {
  readonly backlog: Readonly<Record<'queued' | 'scheduled' | 'running', number>>;
  readonly overdue: number;
  readonly leases: ReadonlyArray<{ blueprint: string; state: string; count: number }>;
  readonly resources: ReadonlyArray<{ blueprint: string; state: string; count: number }>;
  readonly waitingLeases: ReadonlyArray<{ blueprint: string; count: number }>;
  /** `seen`: "once", or "again" (2 passes or more). */
  readonly orphans: ReadonlyArray<{ blueprint: string; seen: string; count: number }>;
  readonly liveWorkers: number;
}

export function setStateGauges(state: StateSnapshot): void {
  for (const [name, count] of Object.entries(state.backlog)) backlog.set({ state: name }, count);
  overdue.set(state.overdue);
  // Reset first: a blueprint or state that no longer has any must not keep its last value.
  for (const [family, rows] of [
    [leases, state.leases],
    [resources, state.resources],
  ] as const) {
    family.reset();
    for (const row of rows) family.set({ blueprint: row.blueprint, state: row.state }, row.count);
  }
  waitingLeases.reset();
  for (const row of state.waitingLeases) waitingLeases.set({ blueprint: row.blueprint }, row.count);
  orphans.reset();
  for (const row of state.orphans) orphans.set({ blueprint: row.blueprint, seen: row.seen }, row.count);
  liveWorkers.set(state.liveWorkers);
}

export function setPoolGauges(pool: { totalCount: number; idleCount: number; waitingCount: number }): void {
  poolConnections.set({ state: 'total' }, pool.totalCount);
  poolConnections.set({ state: 'idle' }, pool.idleCount);
  poolConnections.set({ state: 'waiting' }, pool.waitingCount);
}

/** Counts an append that inserted a command (a coalesced duplicate adds nothing to any queue). */
export function recordAppended(command: Pick<CommandRow, 'target_kind' | 'kind'>, source: CommandSource): void {
  commandsAppended.inc({ object: command.target_kind, kind: command.kind, source });
}

/** What the metrics read of a drain's outcome (`Outcome` in src/drain/Handler.ts, a layer above). */
interface CommittedOutcome {
  readonly status: CommandStatus | 'yield';
  readonly to?: string;
  readonly events?: ReadonlyArray<{ readonly type: string; readonly on?: unknown }>;
  readonly followUps?: ReadonlyArray<{ readonly target: { readonly kind: ObjectKind }; readonly kind: string }>;
}

/** What the metrics read of one command a drain decided (`Decided` in src/drain/commitOutcome.ts): its object's row as the decision read it. */
interface CommittedDecision {
  readonly target: { readonly kind: ObjectKind; readonly id: number };
  readonly object: LeaseRow | ResourceRow | BlueprintRow;
  readonly command: CommandRow;
  readonly outcome: CommittedOutcome;
}

/**
 * A command's outcome was committed by a drain that took it up at `pickedUpAt`
 * (ms since the epoch). Its follow-ups were appended in the same commit.
 * Times come from two clocks (the row's timestamps are PostgreSQL's), so a
 * skew shows as a shorter or longer wait, never as a negative one.
 */
export function recordCommitted(command: CommandRow, outcome: CommittedOutcome, pickedUpAt: number): void {
  for (const followUp of outcome.followUps ?? []) commandsAppended.inc({ object: followUp.target.kind, kind: followUp.kind, source: 'system' });
  const labels = { object: command.target_kind, kind: command.kind };
  if (outcome.status === 'yield') {
    commandsYielded.inc(labels);
    return;
  }
  const now = Date.now();
  const createdAt = new Date(command.created_at).getTime();
  const dueAt = Math.max(createdAt, new Date(command.not_before).getTime());
  commandsSettled.inc({ ...labels, status: outcome.status });
  commandQueued.observe(labels, seconds(pickedUpAt - dueAt));
  commandRunning.observe(labels, seconds(now - pickedUpAt));
  commandTotal.observe(labels, seconds(now - createdAt));
}

/**
 * A drain committed an outcome that left `object` as `after` (undefined: the
 * row was not written). A lease that became active is timed from its
 * creation to the commit, both read from the row (created_at, updated_at),
 * so both come from PostgreSQL's clock. Activation calls the driver, so only
 * the per-object drain commits it (the batched drain hands such commands
 * over), and that drain read the lease's blueprint with its lock.
 */
export function recordRowCommitted(
  kind: ObjectKind,
  before: Pick<LeaseRow, 'state'>,
  after: LeaseRow | ResourceRow | BlueprintRow | undefined,
  blueprints: ReadonlyMap<number, Pick<BlueprintRow, 'name'>>,
): void {
  if (kind !== 'lease' || !after || before.state === READY_STATE.lease || after.state !== READY_STATE.lease) return;
  const lease = after as LeaseRow;
  const blueprint = blueprints.get(lease.blueprint_id);
  // Called after the commit: a metric must never fail a drain whose outcome is committed, so a blueprint the drain did not read is a point not recorded.
  if (!blueprint) return;
  leaseWait.observe({ blueprint: blueprint.name }, seconds(new Date(lease.updated_at).getTime() - new Date(lease.created_at).getTime()));
}

/**
 * One step of a batched drain committed these outcomes together, having
 * taken their commands up at `pickedUpAt`; `blueprintOf` answers the
 * blueprint the drain read with an object's lock.
 */
export function recordBatchCommitted(
  committed: ReadonlyArray<CommittedDecision>,
  pickedUpAt: number,
  blueprintOf: (target: CommittedDecision['target']) => Pick<BlueprintRow, 'name'> | undefined,
): void {
  for (const decision of committed) {
    recordCommitted(decision.command, decision.outcome, pickedUpAt);
    const blueprint = blueprintOf(decision.target);
    // As in recordRowCommitted: a blueprint the drain did not read is a point not recorded, never a failed drain.
    if (blueprint) recordEnds(decision, blueprint.name);
  }
  if (committed.length > 0) drainBatchSize.observe(committed.length);
}

/** The blueprint's events (on its own timeline) that a preemption's decision records, and what each counts as. */
const PREEMPTION_EVENTS: ReadonlyMap<string, string> = new Map([
  ['preempting', 'made'],
  ['preemption_withdrawn', 'withdrawn'],
  ['preemption_taken_over', 'taken_over'],
]);

/**
 * Preemptions, and the ends of leases that were told of theirs ahead, as
 * the drain committed them: the blueprint's preemption events, and a lease
 * that stopped holding its slot while its row carried an `ending`, counted
 * by who ended it (the command's issuer).
 */
function recordEnds({ target, object, command, outcome }: CommittedDecision, blueprint: string): void {
  if (outcome.status !== 'done') return;
  if (target.kind === 'blueprint') {
    for (const event of outcome.events ?? []) {
      const counted = event.on === undefined ? PREEMPTION_EVENTS.get(event.type) : undefined;
      if (counted) preemptions.inc({ blueprint, event: counted });
    }
    return;
  }
  if (target.kind !== 'lease' || outcome.to === undefined || !holdsSlot('lease', object.state) || holdsSlot('lease', outcome.to)) return;
  const lease = object as LeaseRow;
  // Read without throwing: the outcome is committed whatever its metrics make of it.
  const ending = EndingSchema.safeParse(lease.ending).data;
  if (!ending) return;
  const system = `system:${ENDINGS[ending.kind].endedBy}`;
  const endedBy = command.issued_by === system ? system : command.issued_by === lease.holder ? 'holder' : 'other';
  endings.inc({ blueprint, kind: ending.kind, ended_by: endedBy });
}

export type DriverCallOutcome = 'ok' | 'transient' | 'permanent';

/** Times one driver call, counting it by how it ended. */
export async function timeDriverCall<T>(
  driver: string,
  operation: string,
  call: () => Promise<T>,
  outcomeOf: (error: unknown) => DriverCallOutcome,
): Promise<T> {
  const end = driverSeconds.startTimer({ driver, operation });
  let outcome: DriverCallOutcome = 'ok';
  try {
    return await call();
  } catch (error) {
    outcome = outcomeOf(error);
    throw error;
  } finally {
    end();
    driverCalls.inc({ driver, operation, outcome });
  }
}

/** One answered HTTP request; `route` is its URL pattern (the raw URL would make a label per object). */
export function recordHttpRequest(method: string, route: string, status: number, elapsedMs: number): void {
  httpRequests.inc({ method, route, status: String(status) });
  httpSeconds.observe({ method, route }, seconds(elapsedMs));
}

export function recordSweeperWakes(woken: number): void {
  sweeperWakes.inc(woken);
}

export function recordCallbackDelivery(outcome: 'delivered' | 'retry' | 'failed'): void {
  callbackDeliveries.inc({ outcome });
}

export function recordCollectorPass(status: string, actionsByStep: Record<string, number>): void {
  collectorPasses.inc({ status });
  for (const [step, actions] of Object.entries(actionsByStep)) if (actions > 0) collectorActions.inc({ step }, actions);
}

export function recordTableMaintained(table: string, maintenance: string): void {
  tablesMaintained.inc({ table, maintenance });
}

const seconds = (ms: number) => Math.max(0, ms) / 1000;
