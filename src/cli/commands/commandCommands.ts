import type { Command } from 'commander';
import type { CommandStatus } from '../../../migrations/schema.ts';
import type { ObjectRef } from '../../db/objectTables.ts';
import { pageTable } from '../format.ts';
import { addPageOptions, type PageOptions } from '../options.ts';
import { TargetRef } from '../../api/schemas.ts';
import { CommandKindArg, CommandStatusArg, parseWith, PositiveId, textUpTo } from '../parsers.ts';
import { withTransport } from '../transport/withTransport.ts';
import { COMMAND_COLUMNS, commandName, renderCommandDetail } from '../views/commandViews.ts';

interface ListOptions extends PageOptions {
  readonly status?: CommandStatus;
  readonly kind?: string;
  readonly target?: ObjectRef;
}

export function addCommandCommands(program: Command): void {
  const commands = program.command('command').description("commands: requests in objects' queues, and what they caused");

  commands
    .command('show')
    .description('a command, its outcome, and the tree of commands it caused')
    .argument('<id>', 'command id', parseWith(PositiveId))
    .action((id: number, _options: unknown, command: Command) =>
      withTransport(command, async (transport, out) => out.result(await transport.showCommand(id), renderCommandDetail)),
    );

  addPageOptions(
    commands
      .command('list')
      .description('commands, newest first')
      .option('--status <status>', 'only commands with this status', parseWith(CommandStatusArg))
      .option('--kind <kind>', 'only commands of this kind', parseWith(CommandKindArg))
      .option('--target <kind:id>', 'only commands for this object, e.g. lease:12', parseWith(TargetRef)),
  ).action((options: ListOptions, command: Command) =>
    withTransport(command, async (transport, out) => {
      const { status, kind, target, limit, after, order } = options;
      const page = await transport.listCommands({ status, kind, target }, { limit, after, order });
      out.result(page, (p) => pageTable(p, COMMAND_COLUMNS));
    }),
  );

  commands
    .command('cancel')
    .description('cancel a command still queued (refused once it is running or has settled)')
    .argument('<id>', 'command id', parseWith(PositiveId))
    .option('--reason <text>', 'why: recorded on the command and its timeline', parseWith(textUpTo(1000)))
    .action((id: number, options: { reason?: string }, command: Command) =>
      withTransport(command, async (transport, out) =>
        out.result(await transport.cancelCommand(id, options.reason), (answer) => `cancelled command ${commandName(answer.command)}`),
      ),
    );
}
