import type { CancelAnswer, CommandAnswer, CommandDetailShape, LeaseAnswer, LeaseDetail } from '../../api/contract.ts';
import type { Command, CommandTreeNodeShape, ExplanationShape, Lease } from '../../api/shapes.ts';
import type { ObjectRef } from '../../db/objectTables.ts';
import type { BlueprintRef } from '../../read/blueprints.ts';
import type { CommandFilter } from '../../read/commands.ts';
import type { ListPage, Page } from '../../read/page.ts';

/**
 * How the lease and command subcommands reach Slipway: the database itself
 * (LocalTransport) or the HTTP API (RemoteTransport, when SLIPWAY_URL is
 * set). Each subcommand has one code path over this interface; the answers
 * are the API's shapes (src/api/shapes.ts), which the CLI prints with
 * --json, the same either way.
 */
export interface Transport {
  createLease(request: LeaseRequest): Promise<LeaseAnswer>;
  /** Requests a lease and waits until it is set up or has failed, or the time is up. */
  createLeaseAndWait(request: LeaseRequest, wait: Waiting<LeaseAnswer>): Promise<LeaseWaited>;
  /** Queues a command on an object. */
  requestCommand(request: CommandRequest): Promise<CommandAnswer>;
  /** Queues a command and waits for it and everything it causes, or until the time is up. */
  requestCommandAndWait(request: CommandRequest, wait: Waiting<CommandAnswer>): Promise<CommandWaited>;
  showLease(id: number): Promise<LeaseDetail>;
  /** Why a lease waits, and what would grant it now (its blueprint's decision, run and rolled back). */
  explainLease(id: number): Promise<ExplanationShape>;
  /** Whether a request would be granted now, where, or why not: nothing is requested. */
  dryRunLease(request: LeaseRequest): Promise<ExplanationShape>;
  listLeases(filter: LeaseListFilter, page: ListPage): Promise<Page<Lease>>;
  showCommand(id: number): Promise<CommandDetailShape>;
  listCommands(filter: CommandFilter, page: ListPage): Promise<Page<Command>>;
  /** Cancels a command still queued (refused once it runs or has settled). */
  cancelCommand(id: number, reason?: string): Promise<CancelAnswer>;
}

export interface LeaseRequest {
  /** Absent: the selector chooses it. */
  readonly blueprint?: BlueprintRef;
  readonly selector?: string;
  /** Absent: the caller (the CLI user, or the API token's actor). */
  readonly holder?: string;
  readonly expiresInMs?: number;
  readonly heartbeatMs?: number;
  readonly waitTimeoutMs?: number;
  readonly priority?: number;
  /** Absent: `default` (remote mode: the token's team). */
  readonly team?: string;
  /** false: refused at once when a quota is reached. */
  readonly queue?: boolean;
  /** The reservation to be served from during its window. */
  readonly reservation?: number;
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
  readonly tree: readonly CommandTreeNodeShape[];
}

export type LeaseWaited = Omit<LeaseAnswer, 'outcome' | 'tree'> & Waited;

export type CommandWaited = Omit<CommandAnswer, 'outcome' | 'tree' | 'state'> & Waited & { readonly state: string };

export interface LeaseListFilter {
  readonly state?: string;
  readonly blueprint?: BlueprintRef;
  readonly holder?: string;
}
