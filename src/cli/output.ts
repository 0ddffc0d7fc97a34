/**
 * Where a command's output goes. People get progress lines and a rendered
 * result on stdout; with --json, stdout carries exactly one JSON document (the
 * result) so scripts can parse it. Warnings go to stderr either way.
 */
export class Output {
  constructor(readonly json: boolean) {}

  /** A line of progress while a command runs; left out of JSON output. */
  progress(line: string): void {
    if (!this.json) process.stdout.write(`${line}\n`);
  }

  /** The command's result, as JSON or rendered by `render`. */
  result<T>(data: T, render: (data: T) => string): void {
    process.stdout.write(this.json ? `${JSON.stringify(data, null, 2)}\n` : `${render(data)}\n`);
  }

  warn(line: string): void {
    process.stderr.write(`warning: ${line}\n`);
  }
}
