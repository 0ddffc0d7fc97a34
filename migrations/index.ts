import type { Migration } from 'kysely';
import * as core from './0001_core.ts';
import * as simulatedEffects from './0002_simulated_effects.ts';
import * as api from './0003_api.ts';
import * as gc from './0004_gc.ts';
import * as callbacks from './0005_callbacks.ts';
import * as staticPoolClaims from './0006_static_pool_claims.ts';
import * as fastPaths from './0007_fast_paths.ts';
import * as web from './0008_web.ts';
import * as drainChecks from './0009_drain_checks.ts';
import * as cachedPlans from './0010_cached_plans.ts';
import * as appendQueueRoom from './0011_append_queue_room.ts';
import * as drainHandOff from './0012_drain_hand_off.ts';
import * as batchedDrain from './0013_batched_drain.ts';
import * as workerLiveness from './0014_worker_liveness.ts';
import * as oneDrain from './0015_one_drain.ts';
import * as callbackDispatch from './0016_callback_dispatch.ts';
import * as stepsIndependentOfBacklog from './0017_steps_independent_of_backlog.ts';
import * as fewerCommandIndexEntries from './0018_fewer_command_index_entries.ts';
import * as runsOfCommands from './0019_runs_of_commands.ts';
import * as usageSamples from './0020_usage_samples.ts';
import * as lighterWakeUps from './0021_lighter_wake_ups.ts';
import * as queueHeadsByIndex from './0022_queue_heads_by_index.ts';
import * as queueReadsByObject from './0023_queue_reads_by_object.ts';
import * as resourceHealth from './0024_resource_health.ts';
import * as waitDeadlines from './0025_wait_deadlines.ts';
import * as leasePriorities from './0026_lease_priorities.ts';
import * as teams from './0027_teams.ts';
import * as labels from './0028_labels.ts';
import * as checkDueTimes from './0029_check_due_times.ts';
import * as waitingReason from './0030_waiting_reason.ts';
import * as archivedBlueprints from './0031_archived_blueprints.ts';
import * as orphans from './0032_orphans.ts';
import * as possibleLabels from './0033_possible_labels.ts';
import * as slotOrphans from './0034_slot_orphans.ts';
import * as leaseTimeLimits from './0035_lease_time_limits.ts';
import * as sharesOverTime from './0036_shares_over_time.ts';
import * as preemption from './0037_preemption.ts';
import * as unsettledByDueTime from './0038_unsettled_by_due_time.ts';
import * as reservations from './0039_reservations.ts';
import * as soonerCoalescedCommands from './0040_sooner_coalesced_commands.ts';

/** Every migration, in order. Names sort in the order they must run. */
export const migrations: Record<string, Migration> = {
  '0001_core': core,
  '0002_simulated_effects': simulatedEffects,
  '0003_api': api,
  '0004_gc': gc,
  '0005_callbacks': callbacks,
  '0006_static_pool_claims': staticPoolClaims,
  '0007_fast_paths': fastPaths,
  '0008_web': web,
  '0009_drain_checks': drainChecks,
  '0010_cached_plans': cachedPlans,
  '0011_append_queue_room': appendQueueRoom,
  '0012_drain_hand_off': drainHandOff,
  '0013_batched_drain': batchedDrain,
  '0014_worker_liveness': workerLiveness,
  '0015_one_drain': oneDrain,
  '0016_callback_dispatch': callbackDispatch,
  '0017_steps_independent_of_backlog': stepsIndependentOfBacklog,
  '0018_fewer_command_index_entries': fewerCommandIndexEntries,
  '0019_runs_of_commands': runsOfCommands,
  '0020_usage_samples': usageSamples,
  '0021_lighter_wake_ups': lighterWakeUps,
  '0022_queue_heads_by_index': queueHeadsByIndex,
  '0023_queue_reads_by_object': queueReadsByObject,
  '0024_resource_health': resourceHealth,
  '0025_wait_deadlines': waitDeadlines,
  '0026_lease_priorities': leasePriorities,
  '0027_teams': teams,
  '0028_labels': labels,
  '0029_check_due_times': checkDueTimes,
  '0030_waiting_reason': waitingReason,
  '0031_archived_blueprints': archivedBlueprints,
  '0032_orphans': orphans,
  '0033_possible_labels': possibleLabels,
  '0034_slot_orphans': slotOrphans,
  '0035_lease_time_limits': leaseTimeLimits,
  '0036_shares_over_time': sharesOverTime,
  '0037_preemption': preemption,
  '0038_unsettled_by_due_time': unsettledByDueTime,
  '0039_reservations': reservations,
  '0040_sooner_coalesced_commands': soonerCoalescedCommands,
};
