import { cliActor } from '../../domain/Actor.ts';
import { createLease } from '../../objects/createLease.ts';
import { appendCommand, type AppendResult } from '../../queue/appendCommand.ts';
import { blueprintIdFilter } from '../../read/blueprints.ts';
import { readCallbacks } from '../../read/callbacks.ts';
import { readCommandTree } from '../../read/commandTree.ts';
import { findCommand, listCommands, type CommandFilter } from '../../read/commands.ts';
import { findLease, leaseSetUp, listLeases } from '../../read/leases.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { readObjectState } from '../../read/objectState.ts';
import type { ListPage } from '../../read/page.ts';
import { awaitTree } from '../awaitTree.ts';
import type { Session } from '../session.ts';
import type { CommandRequest, LeaseCreated, LeaseListFilter, LeaseRequest, Transport, Waiting } from './Transport.ts';

/** The lease and command subcommands working on the database directly, as the CLI user. */
export class LocalTransport implements Transport {
  constructor(private readonly session: Session) {}

  createLease(request: LeaseRequest) {
    const { reason, holder = cliActor().issuedBy, ...rest } = request;
    return createLease(this.session.db, { ...rest, holder }, cliActor(reason));
  }

  async createLeaseAndWait(request: LeaseRequest, wait: Waiting<LeaseCreated>) {
    const { db } = this.session;
    const created = await this.createLease(request);
    wait.accepted(created);
    const ref = { kind: 'lease', id: created.lease.id } as const;
    const waited = await awaitTree(this.session, {
      rootId: created.command.id,
      object: { ref, until: leaseSetUp },
      timeoutSeconds: wait.timeoutSeconds,
    });
    const lease = await findLease(db, ref.id);
    return { lease, command: waited.tree[0]!, outcome: waited.outcome, tree: waited.tree };
  }

  requestCommand(request: CommandRequest) {
    const { target, kind, payload, reason } = request;
    return appendCommand(this.session.db, { target, kind, payload, actor: cliActor(reason) });
  }

  async requestCommandAndWait(request: CommandRequest, wait: Waiting<AppendResult>) {
    const { db } = this.session;
    const { target } = request;
    const appended = await this.requestCommand(request);
    wait.accepted(appended);
    const waited = await awaitTree(this.session, { rootId: appended.command.id, timeoutSeconds: wait.timeoutSeconds });
    const state = await readObjectState(db, target);
    const { coalesced, record } = appended;
    return { command: waited.tree[0]!, coalesced, record, outcome: waited.outcome, state, tree: waited.tree };
  }

  async showLease(id: number) {
    const { db } = this.session;
    return { lease: await findLease(db, id), ...(await readHistory(db, { kind: 'lease', id })) };
  }

  async listLeases(filter: LeaseListFilter, page: ListPage) {
    const { db } = this.session;
    const blueprintId = await blueprintIdFilter(db, filter.blueprint);
    return listLeases(db, { state: filter.state, blueprintId, holder: filter.holder }, page);
  }

  async showCommand(id: number) {
    const { db } = this.session;
    return { command: await findCommand(db, id), tree: await readCommandTree(db, id), callbacks: await readCallbacks(db, id) };
  }

  listCommands(filter: CommandFilter, page: ListPage) {
    return listCommands(this.session.db, filter, page);
  }
}
