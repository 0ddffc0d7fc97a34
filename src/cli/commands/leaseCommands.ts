import type { Command } from 'commander';
import { READY_STATE } from '../../domain/lifecycle.ts';
import type { BlueprintRef } from '../../read/blueprints.ts';
import { leaseSetUp } from '../../read/leases.ts';
import { assertTreeSucceeded, carriesOn } from '../awaitTree.ts';
import { CliFailure, EXIT } from '../exitStatus.ts';
import { formatTime, pageTable } from '../format.ts';
import { addPageOptions, addStateOptions, addWaitOptions, stateFilter, type StateListOptions, type WaitOptions } from '../options.ts';
import type { Output } from '../output.ts';
import { BlueprintRef as BlueprintRefArg } from '../../api/schemas.ts';
import { Duration, LeaseStateArg, parseWith, PositiveId, textUpTo } from '../parsers.ts';
import { requestCommand } from '../requestCommand.ts';
import type { LeaseAnswer } from '../../api/contract.ts';
import type { LeaseWaited, Transport } from '../transport/Transport.ts';
import { withTransport } from '../transport/withTransport.ts';
import { LEASE_COLUMNS, renderLease, renderLeaseDetail } from '../views/leaseViews.ts';
import { renderExplanation } from '../views/explanationViews.ts';
import { addLeaseRequestOptions, leaseRequestOf, type LeaseRequestOptions } from '../leaseRequestOptions.ts';
import { addLeaseRunCommand } from './leaseRunCommand.ts';
import { formatDuration } from '../../domain/durations.ts';

interface CreateOptions extends WaitOptions, LeaseRequestOptions {
  readonly dryRun?: boolean;
}

interface RenewOptions extends WaitOptions {
  /** Milliseconds. */
  readonly expiresIn?: number;
  /** Milliseconds. */
  readonly heartbeat?: number;
}

interface ListOptions extends StateListOptions {
  readonly blueprint?: BlueprintRef;
  readonly holder?: string;
}

export function addLeaseCommands(program: Command): void {
  const lease = program.command('lease').description("leases: a holder's claim on a slot of one of a blueprint's resources");

  addWaitOptions(
    addLeaseRequestOptions(lease.command('create').description('request a lease and wait until it is active'), 'default: none').option(
      '--dry-run',
      'request nothing: say whether it would be granted now, where, or why not, and what would grant it',
    ),
  ).action((options: CreateOptions, command: Command) =>
    withTransport(command, async (transport, out) =>
      options.dryRun
        ? out.result(await transport.dryRunLease(leaseRequestOf(options)), renderExplanation)
        : requestLease(transport, out, { ...options, timeout: waitFor(options, command) }),
    ),
  );

  addLeaseRunCommand(lease);

  addWaitOptions(
    lease.command('release').description('give a lease up and wait until it is destroyed').argument('<id>', 'lease id', parseWith(PositiveId)),
  ).action((id: number, options: WaitOptions, command: Command) =>
    withTransport(command, (transport, out) => requestCommand(transport, out, { target: { kind: 'lease', id }, kind: 'release' }, options)),
  );

  addWaitOptions(
    lease
      .command('renew')
      .description("push a lease's expiry back (by its term, or --expires-in) and beat its heartbeat")
      .argument('<id>', 'lease id', parseWith(PositiveId))
      .option('--expires-in <duration>', 'expire this long from now (and renew by this term from now on)', parseWith(Duration))
      .option('--heartbeat <duration>', 'beat every this long from now on (a renew v2; workers before it do not run it)', parseWith(Duration)),
  ).action((id: number, options: RenewOptions, command: Command) =>
    withTransport(command, (transport, out) => {
      const payload = {
        ...(options.expiresIn === undefined ? {} : { expiresInMs: options.expiresIn }),
        ...(options.heartbeat === undefined ? {} : { heartbeatMs: options.heartbeat }),
      };
      return requestCommand(transport, out, { target: { kind: 'lease', id }, kind: 'renew', payload }, options);
    }),
  );

  lease
    .command('explain')
    .description('why a waiting lease is not granted now, at each blueprint that could serve it, and the smallest change that would grant it')
    .argument('<id>', 'lease id', parseWith(PositiveId))
    .action((id: number, _options: unknown, command: Command) =>
      withTransport(command, async (transport, out) => out.result(await transport.explainLease(id), renderExplanation)),
    );

  lease
    .command('show')
    .description("a lease's fields, queue and timeline")
    .argument('<id>', 'lease id', parseWith(PositiveId))
    .action((id: number, _options: unknown, command: Command) =>
      withTransport(command, async (transport, out) => out.result(await transport.showLease(id), renderLeaseDetail)),
    );

  addPageOptions(
    addStateOptions(lease.command('list').description('leases, newest first; live ones unless --all or --state'), 'leases', LeaseStateArg)
      .option('--blueprint <name|id>', 'only leases on this blueprint', parseWith(BlueprintRefArg))
      .option('--holder <name>', 'only leases of this holder', parseWith(textUpTo(200))),
  ).action((options: ListOptions, command: Command) =>
    withTransport(command, async (transport, out) => {
      const { blueprint, holder, limit, after, order } = options;
      const page = await transport.listLeases({ state: stateFilter(options), blueprint, holder }, { limit, after, order });
      out.result(page, (p) => pageTable(p, LEASE_COLUMNS));
    }),
  );
}

/**
 * How long to wait for a new lease, in seconds: --timeout, or, with a
 * --wait-timeout and no --timeout, until the workers' timekeeper has had
 * time to release the lease after its deadline (within about a second of
 * it, SLIPWAY_DUE_POLL_MS), so the CLI reports the deadline rather than a
 * wait of its own that ended first.
 */
function waitFor(options: CreateOptions, command: Command): number {
  if (options.waitTimeout === undefined || command.getOptionValueSource('timeout') !== 'default') return options.timeout;
  return Math.max(options.timeout, Math.ceil(options.waitTimeout / 1000) + DEADLINE_MARGIN_S);
}

/** A look of the timekeeper and the release's drain, with room for a backlog of drains or a slower poll. */
const DEADLINE_MARGIN_S = 10;

/**
 * Creates the lease, then (unless --no-wait) waits until it is active or has
 * failed for good. A wait that stops first (--timeout, Ctrl-C) leaves the
 * lease being set up: the message names it and how to give it up.
 */
async function requestLease(transport: Transport, out: Output, options: CreateOptions): Promise<void> {
  const input = leaseRequestOf(options);
  const requested = ({ lease, command }: LeaseAnswer) => `lease ${lease.id} requested for ${lease.holder} (command ${command.id})`;
  if (!options.wait) {
    out.result(await transport.createLease(input), requested);
    return;
  }
  const timeoutSeconds = options.timeout;
  let created: LeaseAnswer | undefined;
  const accepted = (answer: LeaseAnswer) => {
    created = answer;
    out.progress(requested(answer));
  };
  let result: LeaseWaited;
  try {
    result = await transport.createLeaseAndWait(input, { timeoutSeconds, accepted });
  } catch (error) {
    if (created && error instanceof CliFailure && error.exitCode === EXIT.interrupted) {
      throw new CliFailure(`stopped waiting; ${leftBehind(created, 'not active yet')}`, EXIT.interrupted);
    }
    throw error;
  }
  const { lease } = result;
  out.result(result, () => renderLease(lease));
  if (result.outcome === 'timed_out') {
    const state = leaseSetUp(lease.state) ? lease.state : `still ${lease.state}`;
    throw new CliFailure(`timed out after ${formatDuration(timeoutSeconds * 1000)}; ${leftBehind(result, state)}`, EXIT.failed);
  }
  assertTreeSucceeded(result, { rootId: result.command.id, timeoutSeconds });
  if (lease.state !== READY_STATE.lease) {
    // Past its wait deadline (the collector releases it then, as system:deadline): say so, not only the state it ended in.
    const deadline = lease.waitDeadline !== null && Date.parse(lease.waitDeadline) <= Date.now() ? lease.waitDeadline : undefined;
    if (deadline)
      throw new CliFailure(`lease ${lease.id} was not active by its wait deadline ${formatTime(deadline)}; it is ${lease.state}`, EXIT.failed);
    throw new CliFailure(`lease ${lease.id} is ${lease.state}${lease.message ? `: ${lease.message}` : ''}`, EXIT.failed);
  }
}

/** A lease the CLI stopped waiting for: it carries on being set up, so say how to give it up. */
function leftBehind({ lease, command }: { lease: { id: number }; command: { id: number } }, state: string): string {
  return `lease ${lease.id} is ${state}; ${carriesOn(command.id)}; release the lease with: slipway lease release ${lease.id}`;
}
