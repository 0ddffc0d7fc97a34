import { Command } from 'commander';
import { slipwayVersion } from '../version.ts';
import { errorLine } from './output.ts';

type AddCommands = (program: Command) => void;

/**
 * Each module of subcommands, in the order help lists them, with the names
 * it declares at the top level.
 */
const GROUPS: { readonly names: readonly string[]; readonly load: () => Promise<AddCommands> }[] = [
  { names: ['start', 'worker', 'api', 'db'], load: async () => (await import('./commands/serviceCommands.ts')).addServiceCommands },
  { names: ['blueprint'], load: async () => (await import('./commands/blueprintCommands.ts')).addBlueprintCommands },
  { names: ['lease'], load: async () => (await import('./commands/leaseCommands.ts')).addLeaseCommands },
  { names: ['resource'], load: async () => (await import('./commands/resourceCommands.ts')).addResourceCommands },
  { names: ['command'], load: async () => (await import('./commands/commandCommands.ts')).addCommandCommands },
  { names: ['gc'], load: async () => (await import('./commands/gcCommands.ts')).addGcCommands },
  { names: ['token'], load: async () => (await import('./commands/tokenCommands.ts')).addTokenCommands },
  { names: ['team'], load: async () => (await import('./commands/teamCommands.ts')).addTeamCommands },
  { names: ['reservation'], load: async () => (await import('./commands/reservationCommands.ts')).addReservationCommands },
];

/**
 * The `slipway` command line. Given the call's `argv`, it declares only the
 * module of subcommands the call names (`lease` for `slipway --json lease
 * show 1`): the others' modules, and what they import, are not loaded. Every
 * one when the call names none of them (`--help`, `help`, a typo commander
 * suggests a name for), and without `argv`. The settings below are made
 * before any subcommand is added, because subcommands inherit them when
 * created.
 */
export async function buildProgram(argv?: readonly string[]): Promise<Command> {
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
  // The first word that is not an option: the global options take no value.
  const named = argv?.slice(2).find((word) => !word.startsWith('-'));
  const called = GROUPS.filter((group) => named !== undefined && group.names.includes(named));
  for (const add of await Promise.all((called.length > 0 ? called : GROUPS).map((group) => group.load()))) add(program);
  return program;
}
