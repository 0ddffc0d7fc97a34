import type { CommandRow, LeaseRow } from '../../../migrations/schema.ts';
import type { AppendResult } from '../../queue/appendCommand.ts';
import type { ObjectRef } from '../../queue/objectTables.ts';
import type { BlueprintRef } from '../../read/blueprints.ts';
import type { CallbackView } from '../../read/callbacks.ts';
import type { CommandFilter } from '../../read/commands.ts';
import type { CommandTreeNode } from '../../read/commandTree.ts';
import type { LeaseView } from '../../read/leases.ts';
import type { ObjectHistory } from '../../read/objectHistory.ts';
import type { Page, ListPage } from '../../read/page.ts';

/**
 * How the lease and command subcommands reach Slipway: the database itself
 * (LocalTransport) or the HTTP API (RemoteTransport, when SLIPWAY_URL is
 * set). Each subcommand has one code path over this interface; the answers
 * are the documents the CLI prints with --json, the same either way.
 */
export interface Transport {
  createLease(request: LeaseRequest): Promise<LeaseCreated>;
  /** Requests a lease and waits until it is set up or has failed, or the time is up. */
  createLeaseAndWait(request: LeaseRequest, wait: Waiting<LeaseCreated>): Promise<LeaseWaited>;
  /** Queues a command on an object. */
  requestCommand(request: CommandRequest): Promise<AppendResult>;
  /** Queues a command and waits for it and everything it causes, or until the time is up. */
  requestCommandAndWait(request: CommandRequest, wait: Waiting<AppendResult>): Promise<CommandWaited>;
  showLease(id: number): Promise<LeaseDetail>;
  listLeases(filter: LeaseListFilter, page: ListPage): Promise<Page<LeaseView>>;
  showCommand(id: number): Promise<CommandDetail>;
  listCommands(filter: CommandFilter, page: ListPage): Promise<Page<CommandRow>>;
}

export interface LeaseRequest {
  readonly blueprint: BlueprintRef;
  /** Absent: the caller (the CLI user, or the API token's actor). */
  readonly holder?: string;
  readonly expiresInMs?: number;
  readonly heartbeatMs?: number;
  readonly reason?: string;
}

export interface CommandRequest {
  readonly target: ObjectRef;
  readonly kind: string;
  readonly payload?: Record<string, unknown>;
  readonly reason?: string;
}

export interface Waiting<Accepted> {
  /** Seconds. */
  readonly timeoutSeconds: number;
  /** Told once the request is accepted (remotely: once the first answer arrives). */
  readonly accepted: (answer: Accepted) => void;
}

/** How a wait ended: its tree has settled, or the time ran out (interruptions throw). */
export interface Waited {
  readonly outcome: 'settled' | 'timed_out';
  readonly tree: readonly CommandTreeNode[];
}

export interface LeaseCreated {
  readonly lease: LeaseRow | LeaseView;
  readonly command: CommandRow;
}

export interface LeaseWaited extends Waited {
  readonly lease: LeaseView;
  readonly command: CommandTreeNode;
}

export interface CommandWaited extends Waited, Omit<AppendResult, 'command'> {
  readonly command: CommandTreeNode;
  readonly state: string;
}

export interface LeaseListFilter {
  readonly state?: string;
  readonly blueprint?: BlueprintRef;
  readonly holder?: string;
}

export type LeaseDetail = { readonly lease: LeaseView } & ObjectHistory;

export interface CommandDetail {
  readonly command: CommandRow;
  readonly tree: readonly CommandTreeNode[];
  /** Absent in remote mode: the API's GET /v1/commands/{id} does not carry them. */
  readonly callbacks?: readonly CallbackView[];
}
