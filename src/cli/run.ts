import { EXIT, exitStatusOf } from './exitStatus.ts';
import { printableJson } from './format.ts';
import { errorLine } from './output.ts';
import { buildProgram } from './program.ts';
import { stdoutClosed } from './shutdown.ts';

/** Runs one `slipway` command line (main.ts loads this for every call but a lone `--version`); resolves to its exit code. */
export async function run(argv: string[]): Promise<number> {
  try {
    await (await buildProgram(argv)).parseAsync(argv);
    return stdoutClosed() ? EXIT.outputClosed : EXIT.ok;
  } catch (error) {
    // Whoever closed stdout (`| head -1`) has what they wanted: no message, as if killed by SIGPIPE.
    if (stdoutClosed()) return EXIT.outputClosed;
    const status = exitStatusOf(error);
    // With --json, scripts read the error as the API gives it, on stdout; people still get the line on stderr.
    if (argv.includes('--json') && status.exitCode !== EXIT.ok && status.body) process.stdout.write(`${printableJson(status.body)}\n`);
    if (status.message !== null) process.stderr.write(`error: ${errorLine(status.message)}\n`);
    if (status.unexpected && ['debug', 'trace'].includes(process.env.LOG_LEVEL ?? '')) {
      process.stderr.write(`${(error as Error).stack ?? ''}\n`);
    }
    return status.exitCode;
  }
}
