import type { Command } from 'commander';
import { cliActor } from '../../domain/Actor.ts';
import { createLease } from '../../objects/createLease.ts';
import { blueprintIdFilter, type BlueprintRef } from '../../read/blueprints.ts';
import { findLease, leaseSetUp, listLeases } from '../../read/leases.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { assertTreeSucceeded, awaitTree } from '../awaitTree.ts';
import { CliFailure, EXIT } from '../exitStatus.ts';
import { pageTable } from '../format.ts';
import { addPageOptions, addWaitOptions, type PageOptions, type WaitOptions } from '../options.ts';
import { BlueprintRefArg, Duration, LeaseStateArg, parseWith, PositiveId, textUpTo } from '../parsers.ts';
import { requestCommand } from '../requestCommand.ts';
import { withSession, type Session } from '../session.ts';
import { LEASE_COLUMNS, renderLease, renderLeaseDetail } from '../views/leaseViews.ts';

interface CreateOptions extends WaitOptions {
  readonly blueprint: BlueprintRef;
  readonly holder: string;
  /** Milliseconds. */
  readonly expiresIn?: number;
  /** Milliseconds. */
  readonly heartbeat?: number;
}

interface RenewOptions extends WaitOptions {
  /** Milliseconds. */
  readonly expiresIn?: number;
}

interface ListOptions extends PageOptions {
  readonly state?: string;
  readonly blueprint?: BlueprintRef;
  readonly holder?: string;
}

export function addLeaseCommands(program: Command): void {
  const lease = program.command('lease').description("leases: a holder's claim on a slot of one of a blueprint's resources");

  addWaitOptions(
    lease
      .command('create')
      .description('request a lease and wait until it is active')
      .requiredOption('--blueprint <name|id>', 'the blueprint to lease from', parseWith(BlueprintRefArg))
      .option('--holder <name>', 'who holds the lease', parseWith(textUpTo(200)), cliActor().issuedBy)
      .option('--expires-in <duration>', 'give it up after this long, e.g. 30m, 2h, 1h30m', parseWith(Duration))
      .option(
        '--heartbeat <duration>',
        'a heartbeat lease: released once two of these intervals pass without a `lease renew`, e.g. 30s',
        parseWith(Duration),
      ),
  ).action((options: CreateOptions, command: Command) => withSession(command, (session) => requestLease(session, options)));

  addWaitOptions(
    lease
      .command('release')
      .description('give a lease up and wait until it is destroyed')
      .argument('<id>', 'lease id', parseWith(PositiveId)),
  ).action((id: number, options: WaitOptions, command: Command) =>
    withSession(command, (session) => requestCommand(session, { kind: 'lease', id }, 'release', options)),
  );

  addWaitOptions(
    lease
      .command('renew')
      .description("push a lease's expiry back (by its term, or --expires-in) and beat its heartbeat")
      .argument('<id>', 'lease id', parseWith(PositiveId))
      .option('--expires-in <duration>', 'expire this long from now (and renew by this term from now on)', parseWith(Duration)),
  ).action((id: number, options: RenewOptions, command: Command) =>
    withSession(command, (session) =>
      requestCommand(session, { kind: 'lease', id }, 'renew', options, options.expiresIn === undefined ? {} : { expiresInMs: options.expiresIn }),
    ),
  );

  lease
    .command('show')
    .description("a lease's fields, queue and timeline")
    .argument('<id>', 'lease id', parseWith(PositiveId))
    .action((id: number, _options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const detail = { lease: await findLease(db, id), ...(await readHistory(db, { kind: 'lease', id })) };
        out.result(detail, renderLeaseDetail);
      }),
    );

  addPageOptions(
    lease
      .command('list')
      .description('leases, oldest first')
      .option('--state <state>', 'only leases in this state', parseWith(LeaseStateArg))
      .option('--blueprint <name|id>', 'only leases on this blueprint', parseWith(BlueprintRefArg))
      .option('--holder <name>', 'only leases of this holder', parseWith(textUpTo(200))),
  ).action((options: ListOptions, command: Command) =>
    withSession(command, async ({ db, out }) => {
      const blueprintId = await blueprintIdFilter(db, options.blueprint);
      const page = await listLeases(db, { state: options.state, blueprintId, holder: options.holder }, options);
      out.result(page, (p) => pageTable(p, LEASE_COLUMNS));
    }),
  );
}

/** Creates the lease, then (unless --no-wait) waits until it is active or has failed for good. */
async function requestLease(session: Session, options: CreateOptions): Promise<void> {
  const { db, out } = session;
  const input = { blueprint: options.blueprint, holder: options.holder, expiresInMs: options.expiresIn, heartbeatMs: options.heartbeat };
  const created = await createLease(db, input, cliActor(options.reason));
  const requested = `lease ${created.lease.id} requested for ${created.lease.holder} (command ${created.command.id})`;
  if (!options.wait) {
    out.result(created, () => requested);
    return;
  }
  out.progress(requested);
  const ref = { kind: 'lease', id: created.lease.id } as const;
  const request = {
    rootId: created.command.id,
    object: { ref, until: leaseSetUp },
    timeoutSeconds: options.timeout,
  };
  const result = await awaitTree(session, request);
  const lease = await findLease(db, ref.id);
  out.result({ lease, command: result.tree[0], outcome: result.outcome, tree: result.tree }, () => renderLease(lease));
  assertTreeSucceeded(result, request);
  if (lease.state !== 'active') {
    throw new CliFailure(`lease ${lease.id} is ${lease.state}${lease.message ? `: ${lease.message}` : ''}`, EXIT.failed);
  }
}
