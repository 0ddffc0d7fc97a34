import * as commandAncestryIds from './command_ancestry_ids.ts';
import * as commandTreeIds from './command_tree_ids.ts';
import * as objectDrainJobKey from './object_drain_job_key.ts';
import * as objectLockKey from './object_lock_key.ts';
import * as queueCallbackDelivery from './queue_callback_delivery.ts';
import * as queueSettledCallbacks from './queue_settled_callbacks.ts';
import * as appendCommand from './slipway_append_command.ts';
import * as appendWithin from './slipway_append_within.ts';
import * as dispatchCallbacks from './slipway_dispatch_callbacks.ts';
import * as drainClaim from './slipway_drain_claim.ts';
import * as drainHeads from './slipway_drain_heads.ts';
import * as drainRuns from './slipway_drain_runs.ts';
import * as expect from './slipway_expect.ts';
import * as settleCommands from './slipway_settle_commands.ts';
import * as wakeObjects from './slipway_wake_objects.ts';

/**
 * Every live SQL function of Slipway, one file each holding its current
 * definition as pg_get_functiondef prints it (so `db migrate` can tell an
 * unchanged one from a changed one; docs/upgrades.md has the rule). Callees
 * come before their callers: a SQL-language function's body is checked
 * against the functions that exist when it is created.
 */
export const FUNCTION_DEFINITIONS: readonly string[] = [
  objectLockKey,
  objectDrainJobKey,
  expect,
  commandAncestryIds,
  commandTreeIds,
  queueCallbackDelivery,
  queueSettledCallbacks,
  dispatchCallbacks,
  wakeObjects,
  appendCommand,
  appendWithin,
  drainRuns,
  drainHeads,
  drainClaim,
  settleCommands,
].map((f) => f.definition);
