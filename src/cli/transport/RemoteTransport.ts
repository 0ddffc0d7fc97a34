import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandRow } from '../../../migrations/schema.ts';
import type { AppendResult } from '../../queue/appendCommand.ts';
import type { ObjectRef } from '../../queue/objectTables.ts';
import type { CommandFilter } from '../../read/commands.ts';
import { treeSettled, type CommandTreeNode } from '../../read/commandTree.ts';
import { leaseSetUp, type LeaseView } from '../../read/leases.ts';
import type { Page, ListPage } from '../../read/page.ts';
import { carriesOn } from '../awaitTree.ts';
import { CliFailure, EXIT } from '../exitStatus.ts';
import type { Output } from '../output.ts';
import { progressPrinter } from '../progress.ts';
import type { ApiCaller } from './ApiCaller.ts';
import type {
  CommandDetail,
  CommandRequest,
  CommandWaited,
  LeaseCreated,
  LeaseDetail,
  LeaseListFilter,
  LeaseRequest,
  LeaseWaited,
  Transport,
  Waiting,
} from './Transport.ts';

/** The longest `?wait=` the API holds a request for (src/api/schemas.ts MAX_WAIT_S). */
const API_MAX_WAIT_S = 60;
/** How often a wait longer than the API's looks again, once the API's wait has run out. */
const POLL_MS = 1000;

/** Lease options the API's POST /v1/leases does not take: refused rather than silently dropped. */
const LOCAL_ONLY_LEASE_OPTIONS: ReadonlyArray<readonly [keyof LeaseRequest, string]> = [
  ['holder', '--holder (the API makes the token the holder)'],
];

/** Each object kind's API collection, and the key of its document in a GET. */
const COLLECTIONS: Record<ObjectRef['kind'], string> = { lease: 'leases', resource: 'resources', blueprint: 'blueprints' };

/**
 * The lease and command subcommands through the HTTP API (SLIPWAY_URL), as
 * the token's actor. A wait is the API's `?wait=` (at most 60 s); a longer
 * --timeout goes on by reading the command (and the lease) once a second
 * until it settles or the time is up. Progress is printed from those
 * answers, so it has fewer lines than a local wait's.
 */
export class RemoteTransport implements Transport {
  constructor(
    private readonly api: ApiCaller,
    private readonly out: Output,
  ) {}

  async createLease(request: LeaseRequest) {
    return (await this.api.post<LeaseCreated>('/v1/leases', leaseBody(request))).body;
  }

  async createLeaseAndWait(request: LeaseRequest, wait: Waiting<LeaseCreated>) {
    const body = leaseBody(request);
    const deadline = Date.now() + wait.timeoutSeconds * 1000;
    const { body: first } = await this.api.post<LeaseWaited>(`/v1/leases?wait=${apiWait(wait.timeoutSeconds)}`, body);
    wait.accepted(first);
    const leasePath = `/v1/leases/${first.lease.id}`;
    const waited = await this.untilSettled(first, deadline, async () => {
      const { tree } = await this.api.get<CommandDetail>(`/v1/commands/${first.command.id}`);
      const { lease } = await this.api.get<LeaseDetail>(leasePath);
      return { tree, lease, settled: treeSettled(tree) && leaseSetUp(lease.state) };
    });
    return { lease: waited.lease, command: waited.tree[0]!, outcome: waited.outcome, tree: waited.tree } satisfies LeaseWaited;
  }

  async requestCommand(request: CommandRequest) {
    return (await this.api.post<AppendResult>(commandsPath(request.target), commandBody(request))).body;
  }

  async requestCommandAndWait(request: CommandRequest, wait: Waiting<AppendResult>) {
    const { target } = request;
    const path = commandsPath(target);
    const body = commandBody(request);
    const deadline = Date.now() + wait.timeoutSeconds * 1000;
    const { body: first } = await this.api.post<CommandWaited>(`${path}?wait=${apiWait(wait.timeoutSeconds)}`, body);
    wait.accepted(first);
    const waited = await this.untilSettled(first, deadline, async () => {
      const { tree } = await this.api.get<CommandDetail>(`/v1/commands/${first.command.id}`);
      const object = await this.api.get<Record<string, { state: string }>>(`/v1/${COLLECTIONS[target.kind]}/${target.id}`);
      return { tree, state: object[target.kind]!.state, settled: treeSettled(tree) };
    });
    const { coalesced, record } = first;
    return { command: waited.tree[0]!, coalesced, record, outcome: waited.outcome, state: waited.state, tree: waited.tree } satisfies CommandWaited;
  }

  showLease(id: number) {
    return this.api.get<LeaseDetail>(`/v1/leases/${id}`);
  }

  listLeases(filter: LeaseListFilter, page: ListPage) {
    return this.api.get<Page<LeaseView>>(`/v1/leases${query({ ...filter, ...page })}`);
  }

  showCommand(id: number) {
    return this.api.get<CommandDetail>(`/v1/commands/${id}`);
  }

  listCommands(filter: CommandFilter, page: ListPage) {
    const target = filter.target && `${filter.target.kind}:${filter.target.id}`;
    return this.api.get<Page<CommandRow>>(`/v1/commands${query({ ...filter, target, ...page })}`);
  }

  /**
   * Goes on from the API's answer to a waiting POST: when its wait ran out
   * before ours, reads again once a second until `read` says settled or our
   * deadline passes. Prints the tree's progress from every answer.
   */
  private async untilSettled<T extends { outcome: string; tree: readonly CommandTreeNode[] }>(
    first: T,
    deadline: number,
    read: () => Promise<Partial<T> & { tree: readonly CommandTreeNode[]; settled: boolean }>,
  ): Promise<T & { outcome: 'settled' | 'timed_out' }> {
    const printProgress = progressPrinter(this.out);
    const show = (tree: readonly CommandTreeNode[]) => printProgress({ tree, objectState: null, transitions: [] });
    show(first.tree);
    let latest = first;
    let settled = first.outcome === 'settled';
    while (!settled && Date.now() < deadline) {
      await this.pause(Math.min(POLL_MS, deadline - Date.now()), first.tree[0]!.id);
      const { settled: now, ...fresh } = await read();
      latest = { ...latest, ...fresh };
      settled = now;
      show(latest.tree);
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
}

/** POST /v1/leases's body; refuses the options it does not take rather than dropping them. */
function leaseBody(request: LeaseRequest): Record<string, unknown> {
  for (const [option, flag] of LOCAL_ONLY_LEASE_OPTIONS) {
    if (request[option] !== undefined) throw new CliFailure(`${flag} is not available in remote mode (SLIPWAY_URL)`, EXIT.usage);
  }
  const { blueprint, expiresInMs, heartbeatMs, reason } = request;
  return Object.fromEntries(Object.entries({ blueprint, expiresInMs, heartbeatMs, reason }).filter(([, value]) => value !== undefined));
}

function commandsPath(target: ObjectRef): string {
  return `/v1/${COLLECTIONS[target.kind]}/${target.id}/commands`;
}

function commandBody({ kind, payload, reason }: CommandRequest): Record<string, unknown> {
  return { kind, ...(payload === undefined ? {} : { payload }), ...(reason === undefined ? {} : { reason }) };
}

/** The API's wait for a CLI --timeout: all of it, up to the API's maximum. */
function apiWait(timeoutSeconds: number): string {
  return String(Math.min(timeoutSeconds, API_MAX_WAIT_S));
}

/** `?a=1&b=x` from the defined values. */
function query(values: Record<string, string | number | undefined>): string {
  const defined = Object.entries(values).filter((entry): entry is [string, string | number] => entry[1] !== undefined);
  return defined.length === 0 ? '' : `?${new URLSearchParams(defined.map(([key, value]) => [key, String(value)]))}`;
}
