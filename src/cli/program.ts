import { Command } from 'commander';
import { addBlueprintCommands } from './commands/blueprintCommands.ts';
import { addCommandCommands } from './commands/commandCommands.ts';
import { addTeamCommands } from './commands/teamCommands.ts';
import { addGcCommands } from './commands/gcCommands.ts';
import { addLeaseCommands } from './commands/leaseCommands.ts';
import { addResourceCommands } from './commands/resourceCommands.ts';
import { addServiceCommands } from './commands/serviceCommands.ts';
import { addTokenCommands } from './commands/tokenCommands.ts';
import { slipwayVersion } from '../version.ts';
import { errorLine } from './output.ts';

/**
 * The `slipway` command line. The settings below are made before any
 * subcommand is added, because subcommands inherit them when created.
 */
export function buildProgram(): Command {
  const program = new Command('slipway')
    .description('Slipway admin CLI: leases on pooled resources, every change through per-object command queues')
    .version(slipwayVersion(), '--version', 'print the version (package version + git commit) and exit')
    .option('--json', 'print the result as one JSON document (progress lines are left out)')
    .option('--local', 'run a command that works on the database directly even when SLIPWAY_URL is set (it does not go to that server)')
    .configureHelp({ showGlobalOptions: true })
    // Usage errors throw (main maps them to an exit code) instead of exiting here.
    .exitOverride()
    // One line per error: commander puts its "Did you mean" hint on a line of its own.
    .configureOutput({ outputError: (text, write) => write(`${errorLine(text.trim().replace(/\s*\n\s*/g, ' '))}\n`) });
  addServiceCommands(program);
  addBlueprintCommands(program);
  addLeaseCommands(program);
  addResourceCommands(program);
  addCommandCommands(program);
  addGcCommands(program);
  addTokenCommands(program);
  addTeamCommands(program);
  return program;
}
