import { takeOverShutdown } from './shutdown.ts';

takeOverShutdown();
const argv = process.argv;
// A lone `--version`, which scripts and health checks call to learn what they
// run, reads two small files and loads none of the CLI: the program with
// every subcommand, and the packages it needs, are most of a call's start-up.
// It prints what commander's `--version` prints.
const exitCode = argv.length === 3 && argv[2] === '--version' ? await printVersion() : await (await import('./run.ts')).run(argv);
// Exit explicitly: a LISTEN connection or timer left behind by a failed
// command must not keep the CLI alive.
process.exit(exitCode);

async function printVersion(): Promise<number> {
  const { slipwayVersion } = await import('../version.ts');
  process.stdout.write(`${slipwayVersion()}\n`);
  return 0;
}
