import type { Command } from 'commander';
import type { BlueprintRef } from '../../read/blueprints.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { historyOf, pageOf, resourceDetailOf, resourceOf } from '../../api/shapes.ts';
import { pageTable } from '../format.ts';
import { later } from '../later.ts';
import { addPageOptions, addStateOptions, addWaitOptions, stateFilter, type StateListOptions, type WaitOptions } from '../options.ts';
import { BlueprintRef as BlueprintRefArg } from '../../api/schemas.ts';
import { withOldNames } from '../oldNames.ts';
import { parseWith, PositiveId, ResourceStateArg } from '../parsers.ts';
import { requestCommand } from '../requestCommand.ts';
import { withSession } from '../session.ts';
import { localTransportOf } from '../transport/withTransport.ts';
import { RESOURCE_COLUMNS, renderResourceDetail } from '../views/resourceViews.ts';

interface ListOptions extends StateListOptions {
  readonly blueprint?: BlueprintRef;
}

/** The database's reads, by the subcommands that read: every call, remote ones too, declares these subcommands. */
const blueprintIdFilter = later(() => import('../../read/blueprints.ts'), 'blueprintIdFilter');
const resourceReads = () => import('../../read/resources.ts');
const listResources = later(resourceReads, 'listResources');
const readResourceDetail = later(resourceReads, 'readResourceDetail');

/** The commands an operator may send a resource, as data: name → what it does. */
const REQUESTS = {
  release: 'release the resource and every lease on it, then destroy it; waits until done',
  reclaim: 'release the resource only if no lease holds it (fails otherwise); waits until done',
  retire: 'take no new leases and destroy the resource once its leases have ended; waits until retired (and destroyed, if no lease holds it)',
  cordon: 'put the resource into maintenance: no new lease lands on it, its leases carry on; waits until done',
  uncordon: 'take the resource out of maintenance: it takes leases again; waits until done',
  check: 'ask the driver now whether the resource is still there and healthy (unhealthy: quarantined; gone: broken); waits until done',
  repair: 'check a quarantined resource again: healthy, it takes leases again (fails if still unhealthy); waits until done',
} as const;

export function addResourceCommands(program: Command): void {
  const resource = program.command('resource').description("resources: the things a blueprint's driver makes, each with lease slots");

  const requests = Object.entries(REQUESTS).map(([kind, description]) => ({ verb: kind, kind, description }));
  for (const { verb, kind, description, notice } of withOldNames('resource', requests)) {
    addWaitOptions(
      resource
        .command(verb, { hidden: notice !== undefined })
        .description(description)
        .argument('<id>', 'resource id', parseWith(PositiveId)),
    ).action((id: number, options: WaitOptions, command: Command) =>
      withSession(command, async (session) => {
        if (notice) session.out.warn(notice);
        await requestCommand(await localTransportOf(session), session.out, { target: { kind: 'resource', id }, kind }, options);
      }),
    );
  }

  resource
    .command('show')
    .description("a resource's fields, slots, queue and timeline")
    .argument('<id>', 'resource id', parseWith(PositiveId))
    .action((id: number, _options: unknown, command: Command) =>
      withSession(command, async ({ db, out }) => {
        const detail = {
          resource: resourceDetailOf(await readResourceDetail(db, id)),
          ...historyOf(await readHistory(db, { kind: 'resource', id })),
        };
        out.result(detail, renderResourceDetail);
      }),
    );

  addPageOptions(
    addStateOptions(
      resource.command('list').description('resources, newest first; live ones unless --all or --state'),
      'resources',
      ResourceStateArg,
    ).option('--blueprint <name|id>', 'only resources of this blueprint', parseWith(BlueprintRefArg)),
  ).action((options: ListOptions, command: Command) =>
    withSession(command, async ({ db, out }) => {
      const blueprintId = await blueprintIdFilter(db, options.blueprint);
      const page = pageOf(await listResources(db, { state: stateFilter(options), blueprintId }, options), resourceOf);
      out.result(page, (p) => pageTable(p, RESOURCE_COLUMNS));
    }),
  );
}
