import { commandOf, callbackOf, leaseOf, pageOf, treeOf } from '../../api/shapes.ts';
import { readLeaseDetail } from '../../api/leaseDetail.ts';
import { cliActor } from '../../domain/Actor.ts';
import type { AppendResult } from '../../queue/appendCommand.ts';
import { blueprintIdFilter } from '../../read/blueprints.ts';
import { readCallbacks } from '../../read/callbacks.ts';
import { readCommandTree } from '../../read/commandTree.ts';
import { findCommand, listCommands, type CommandFilter } from '../../read/commands.ts';
import { findLease, leaseSetUp, listLeases } from '../../read/leases.ts';
import { readObjectState } from '../../read/objectState.ts';
import type { ListPage } from '../../read/page.ts';
import { awaitTree } from '../awaitTree.ts';
import { later } from '../later.ts';
import type { Session } from '../session.ts';
import type { CommandRequest, LeaseListFilter, LeaseRequest, Transport, Waiting } from './Transport.ts';
import type { CommandAnswer, LeaseAnswer } from '../../api/contract.ts';

/**
 * What changes objects (appending commands, and with them their admission
 * checks and metrics) is loaded by the subcommands that change something.
 */
const createLease = later(() => import('../../objects/createLease.ts'), 'createLease');
const appendCommand = later(() => import('../../queue/appendCommand.ts'), 'appendCommand');
const explainLease = later(() => import('../../drain/explainLease.ts'), 'explainLease');
const dryRunLease = later(() => import('../../drain/explainLease.ts'), 'dryRunLease');
const cancelCommandById = later(() => import('../../queue/cancelCommand.ts'), 'cancelCommandById');

/**
 * The lease and command subcommands working on the database directly, as the
 * CLI user. Answers in the API's shapes, made by the API's own mappers.
 */
export class LocalTransport implements Transport {
  constructor(private readonly session: Session) {}

  async createLease(request: LeaseRequest) {
    const { reason, holder = cliActor().issuedBy, ...rest } = request;
    const { lease, command } = await createLease(this.session.db, { ...rest, holder }, cliActor(reason));
    return { lease: leaseOf(lease), command: commandOf(command) };
  }

  async createLeaseAndWait(request: LeaseRequest, wait: Waiting<LeaseAnswer>) {
    const { db } = this.session;
    const created = await this.createLease(request);
    wait.accepted(created);
    const ref = { kind: 'lease', id: created.lease.id } as const;
    const waited = await awaitTree(this.session, {
      rootId: created.command.id,
      object: { ref, until: leaseSetUp },
      timeoutSeconds: wait.timeoutSeconds,
    });
    const lease = leaseOf(await findLease(db, ref.id));
    return { lease, command: commandOf(waited.tree[0]!), outcome: waited.outcome, tree: treeOf(waited.tree) };
  }

  async requestCommand(request: CommandRequest) {
    return answerOf(await this.append(request));
  }

  async requestCommandAndWait(request: CommandRequest, wait: Waiting<CommandAnswer>) {
    const { db } = this.session;
    const { target } = request;
    const appended = await this.append(request);
    wait.accepted(answerOf(appended));
    const waited = await awaitTree(this.session, { rootId: appended.command.id, timeoutSeconds: wait.timeoutSeconds });
    const state = await readObjectState(db, target);
    const { coalesced, record } = appended;
    return { command: commandOf(waited.tree[0]!), coalesced, record: commandOf(record), outcome: waited.outcome, state, tree: treeOf(waited.tree) };
  }

  showLease(id: number) {
    return readLeaseDetail(this.session.db, id);
  }

  explainLease(id: number) {
    return explainLease(this.session.db, id);
  }

  dryRunLease(request: LeaseRequest) {
    const { reason, holder = cliActor().issuedBy, ...rest } = request;
    return dryRunLease(this.session.db, { ...rest, holder }, cliActor(reason));
  }

  async listLeases(filter: LeaseListFilter, page: ListPage) {
    const { db } = this.session;
    const blueprintId = await blueprintIdFilter(db, filter.blueprint);
    return pageOf(await listLeases(db, { state: filter.state, blueprintId, holder: filter.holder }, page), leaseOf);
  }

  async showCommand(id: number) {
    const { db } = this.session;
    return {
      command: commandOf(await findCommand(db, id)),
      tree: treeOf(await readCommandTree(db, id)),
      callbacks: (await readCallbacks(db, id)).map(callbackOf),
    };
  }

  async listCommands(filter: CommandFilter, page: ListPage) {
    return pageOf(await listCommands(this.session.db, filter, page), commandOf);
  }

  async cancelCommand(id: number, reason?: string) {
    return { command: commandOf(await cancelCommandById(this.session.db, id, cliActor(reason))) };
  }

  private append(request: CommandRequest): Promise<AppendResult> {
    const { target, kind, payload, reason } = request;
    return appendCommand(this.session.db, { target, kind, payload, actor: cliActor(reason) });
  }
}

function answerOf({ command, coalesced, record }: AppendResult): CommandAnswer {
  return { command: commandOf(command), coalesced, record: commandOf(record) };
}
