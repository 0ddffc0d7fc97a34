import { setTimeout as sleep } from 'node:timers/promises';
import { type CommandAnswer, type LeaseAnswer, leaseAnswerOf } from '../../api/contract.ts';
import type { CommandTreeNodeShape, LineStandingShape } from '../../api/shapes.ts';
import { ApiRefusal, UnexpectedAnswer, Unreachable } from '../../client/errors.ts';
import type { CallAnswer, CallInput, OperationName, SlipwayClient } from '../../client/SlipwayClient.ts';
import type { ObjectRef } from '../../db/objectTables.ts';
import type { CommandFilter } from '../../read/commands.ts';
import { treeSettled } from '../../read/settled.ts';
import { leaseSetUp } from '../../read/leases.ts';
import type { ListPage } from '../../read/page.ts';
import { carriesOn } from '../awaitTree.ts';
import { CliFailure, EXIT } from '../exitStatus.ts';
import type { Output } from '../output.ts';
import { progressPrinter } from '../progress.ts';
import type { CommandRequest, CommandWaited, LeaseListFilter, LeaseRequest, LeaseWaited, Transport, Waiting } from './Transport.ts';

/** The longest `?wait=` the API holds a request for (src/api/schemas.ts MAX_WAIT_S). */
const API_MAX_WAIT_S = 60;
/** How often a wait longer than the API's looks again, once the API's wait has run out. */
const POLL_MS = 1000;

/** Lease options the API's POST /v1/leases does not take: refused rather than silently dropped. */
const LOCAL_ONLY_LEASE_OPTIONS: ReadonlyArray<readonly [keyof LeaseRequest, string]> = [
  ['holder', '--holder (the API makes the token the holder)'],
  ['team', "--team (the API puts the lease in the token's team)"],
];

/** The operation that queues a command on each kind of object. */
const QUEUE_COMMAND = { lease: 'queueLeaseCommand', resource: 'queueResourceCommand', blueprint: 'queueBlueprintCommand' } as const;

/** API refusals as the CLI's exit codes: the same codes a local run exits with for the same refusal. */
const EXIT_BY_STATUS: Readonly<Record<number, CliFailure['exitCode']>> = {
  400: EXIT.usage,
  401: EXIT.denied,
  403: EXIT.denied,
  404: EXIT.notFound,
  409: EXIT.conflict,
};

/** Refusals whose code says more than their status: a quota's 429 exits as a local run's over-quota refusal does, not as a rate limit. */
const EXIT_BY_CODE: Readonly<Record<string, CliFailure['exitCode']>> = { over_quota: EXIT.conflict };

/**
 * The lease and command subcommands through the HTTP API (SLIPWAY_URL), as
 * the token's actor, with the typed client (src/client/). A wait is the API's
 * `?wait=` (at most 60 s); a longer --timeout goes on by reading the command
 * (and the lease) once a second until it settles or the time is up.
 * Progress is printed from those answers, so it has fewer lines than a local
 * wait's.
 */
export class RemoteTransport implements Transport {
  constructor(
    private readonly api: SlipwayClient,
    private readonly out: Output,
  ) {}

  async createLease(request: LeaseRequest): Promise<LeaseAnswer> {
    return leaseAnswerOf((await this.call('createLease', { body: leaseBody(request) })).body);
  }

  async createLeaseAndWait(request: LeaseRequest, wait: Waiting<LeaseAnswer>): Promise<LeaseWaited> {
    const deadline = Date.now() + wait.timeoutSeconds * 1000;
    const first = leaseAnswerOf((await this.call('createLease', { query: { wait: apiWait(wait.timeoutSeconds) }, body: leaseBody(request) })).body);
    wait.accepted(first);
    const waited = await this.untilSettled({ ...first, tree: first.tree ?? [] }, first.outcome, deadline, async () => {
      const { tree } = (await this.call('getCommand', { params: { id: first.command.id } })).body;
      const { lease, line } = (await this.call('getLease', { params: { id: first.lease.id } })).body;
      return { tree, lease, standing: line, settled: treeSettled(tree) && leaseSetUp(lease.state) };
    });
    return { lease: waited.lease, command: rootOf(waited.tree), outcome: waited.outcome, tree: waited.tree };
  }

  async requestCommand(request: CommandRequest): Promise<CommandAnswer> {
    return (await this.call(QUEUE_COMMAND[request.target.kind], { params: { id: request.target.id }, body: commandBody(request) })).body;
  }

  async requestCommandAndWait(request: CommandRequest, wait: Waiting<CommandAnswer>): Promise<CommandWaited> {
    const { target } = request;
    const deadline = Date.now() + wait.timeoutSeconds * 1000;
    const query = { wait: apiWait(wait.timeoutSeconds) };
    const { body: first } = await this.call(QUEUE_COMMAND[target.kind], { params: { id: target.id }, query, body: commandBody(request) });
    wait.accepted(first);
    const start = { ...first, tree: first.tree ?? [], state: first.state ?? '' };
    const waited = await this.untilSettled(start, first.outcome, deadline, async () => {
      const { tree } = (await this.call('getCommand', { params: { id: first.command.id } })).body;
      return { tree, state: await this.stateOf(target), settled: treeSettled(tree) };
    });
    const { coalesced, record } = first;
    return { command: rootOf(waited.tree), coalesced, record, outcome: waited.outcome, state: waited.state, tree: waited.tree };
  }

  async showLease(id: number) {
    return (await this.call('getLease', { params: { id } })).body;
  }

  async explainLease(id: number) {
    return (await this.call('explainLease', { params: { id } })).body;
  }

  async dryRunLease(request: LeaseRequest) {
    const { body } = await this.call('createLease', { query: { dryRun: 'true' }, body: leaseBody(request) });
    if ('command' in body) throw new Error(`a dry run was answered with a lease (${body.lease.id}): the API did not take dryRun`);
    return body;
  }

  async listLeases(filter: LeaseListFilter, page: ListPage) {
    return (await this.call('listLeases', { query: { ...filter, ...page } })).body;
  }

  async showCommand(id: number) {
    return (await this.call('getCommand', { params: { id } })).body;
  }

  async listCommands(filter: CommandFilter, page: ListPage) {
    const { status, kind, target } = filter;
    const query = { status, kind, target: target && `${target.kind}:${target.id}`, ...page };
    return (await this.call('listCommands', { query })).body;
  }

  async cancelCommand(id: number, reason?: string) {
    return (await this.call('cancelCommand', { params: { id }, body: defined({ reason }) })).body;
  }

  /** An object's state, read through its operation. */
  private async stateOf(target: ObjectRef): Promise<string> {
    const params = { id: target.id };
    switch (target.kind) {
      case 'lease':
        return (await this.call('getLease', { params })).body.lease.state;
      case 'resource':
        return (await this.call('getResource', { params })).body.resource.state;
      case 'blueprint':
        return (await this.call('getBlueprint', { params: { ref: target.id } })).body.blueprint.state;
    }
  }

  /**
   * Goes on from the API's answer to a waiting POST: when its wait ran out
   * before ours, reads again once a second until `read` says settled or our
   * deadline passes. Prints the tree's progress from every answer.
   */
  private async untilSettled<T extends { tree: readonly CommandTreeNodeShape[] }>(
    first: T,
    outcome: string | undefined,
    deadline: number,
    read: () => Promise<Partial<T> & { tree: readonly CommandTreeNodeShape[]; standing?: LineStandingShape | null; settled: boolean }>,
  ): Promise<T & { outcome: 'settled' | 'timed_out' }> {
    const printProgress = progressPrinter(this.out);
    printProgress({ tree: first.tree, transitions: [] });
    let latest = first;
    let settled = outcome === 'settled';
    while (!settled && Date.now() < deadline) {
      await this.pause(Math.min(POLL_MS, deadline - Date.now()), rootOf(first.tree).id);
      const { settled: now, standing, ...fresh } = await read();
      latest = { ...latest, ...fresh };
      settled = now;
      printProgress({ tree: latest.tree, transitions: [], standing });
    }
    return { ...latest, outcome: settled ? 'settled' : 'timed_out' };
  }

  private async pause(ms: number, commandId: number): Promise<void> {
    try {
      await sleep(ms, undefined, { signal: this.api.signal });
    } catch {
      throw new CliFailure(`stopped waiting; ${carriesOn(commandId)}`, EXIT.interrupted);
    }
  }

  /** One call of the typed client, every failure turned into the CLI's one-line error with its exit code. */
  private async call<N extends OperationName>(name: N, input: CallInput<N>): Promise<CallAnswer<N>> {
    try {
      return await this.api.call(name, input);
    } catch (error) {
      throw failureOf(error, this.api.signal);
    }
  }
}

/** The root of a command tree: the command itself. */
function rootOf(tree: readonly CommandTreeNodeShape[]): CommandTreeNodeShape {
  const root = tree[0];
  if (!root) throw new CliFailure('the API answered with an empty command tree', EXIT.failed);
  return root;
}

/** A failed call as the CLI's error: the API's own refusal (code, details, exit code of its status), or why it could not be asked. */
function failureOf(error: unknown, signal: AbortSignal | undefined): CliFailure {
  if (error instanceof ApiRefusal) {
    // The request id is the server's business; the rest is the refusal.
    const { requestId: _requestId, ...details } = error.body.details;
    // The API's messages already say when to retry (429, 503).
    return new CliFailure(error.body.message, EXIT_BY_CODE[error.body.code] ?? EXIT_BY_STATUS[error.status] ?? EXIT.failed, {
      code: error.body.code,
      details,
    });
  }
  if (error instanceof UnexpectedAnswer) return new CliFailure(`${error.message} (SLIPWAY_URL)`, EXIT.failed);
  if (error instanceof Unreachable)
    return new CliFailure(`cannot reach the Slipway API at ${error.origin} (SLIPWAY_URL): ${error.reason}`, EXIT.failed);
  if (signal?.aborted) return new CliFailure('stopped waiting for the Slipway API', EXIT.interrupted);
  return error instanceof CliFailure ? error : new CliFailure(`the Slipway API call failed: ${(error as Error).message}`, EXIT.failed);
}

/** POST /v1/leases's body; refuses the options it does not take rather than dropping them. */
export function leaseBody(request: LeaseRequest) {
  for (const [option, flag] of LOCAL_ONLY_LEASE_OPTIONS) {
    if (request[option] !== undefined) throw new CliFailure(`${flag} is not available in remote mode (SLIPWAY_URL)`, EXIT.usage);
  }
  const { blueprint, selector, expiresInMs, heartbeatMs, waitTimeoutMs, priority, queue, reservation, reason } = request;
  return defined({ blueprint, selector, expiresInMs, heartbeatMs, waitTimeoutMs, priority, queue, reservation, reason });
}

function commandBody({ kind, payload, reason }: CommandRequest) {
  return { kind, ...defined({ payload, reason }) };
}

/** The entries whose value is given: JSON would drop the others anyway, but the request reads plainer without them. */
function defined<T extends Record<string, unknown>>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** The API's wait for a CLI --timeout: all of it, up to the API's maximum. */
function apiWait(timeoutSeconds: number): number {
  return Math.min(timeoutSeconds, API_MAX_WAIT_S);
}
