import { printable, printableJson, printableLines } from './format.ts';

/**
 * Where a command's output goes. People get progress lines and a rendered
 * result on stdout; with --json, stdout carries exactly one JSON document (the
 * result) so scripts can parse it. Warnings go to stderr either way. Nothing
 * reaches the terminal with a control character left in it (see printable).
 */
export class Output {
  constructor(readonly json: boolean) {}

  /** A line of progress while a command runs; left out of JSON output. */
  progress(line: string): void {
    if (!this.json) process.stdout.write(`${printableLines(line)}\n`);
  }

  /** The command's result, as JSON or rendered by `render`. */
  result<T>(data: T, render: (data: T) => string): void {
    process.stdout.write(`${this.json ? printableJson(data) : printableLines(render(data))}\n`);
  }

  warn(line: string): void {
    process.stderr.write(`warning: ${printableLines(line)}\n`);
  }
}

/** The most of one command-line argument an error line repeats. */
const MAX_ECHOED = 80;

/**
 * An error message as the one line the CLI prints: control characters
 * escaped, and any argument longer than MAX_ECHOED (which commander and
 * our messages repeat whole) cut to its start and its length.
 */
export function errorLine(message: string, argv: readonly string[] = process.argv.slice(2)): string {
  const long = argv.flatMap((arg) => [arg, arg.slice(arg.indexOf('=') + 1)]).filter((arg) => arg.length > MAX_ECHOED);
  // Longest first: an `--option=value` is cut whole before the value inside it.
  const cut = [...new Set(long)]
    .sort((a, b) => b.length - a.length)
    .reduce((line, arg) => line.split(arg).join(`${arg.slice(0, MAX_ECHOED)}… (${arg.length} characters)`), message);
  return printable(cut.trim());
}
