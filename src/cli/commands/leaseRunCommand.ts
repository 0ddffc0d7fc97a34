import type { Command } from 'commander';
import { formatDuration } from '../../domain/durations.ts';
import { DEFAULT_HEARTBEAT_MS } from '../../domain/holding.ts';
import { later } from '../later.ts';
import { addLeaseRequestOptions } from '../leaseRequestOptions.ts';
import type { RunOptions } from '../leaseRun/runWithLease.ts';
import { Duration, parseWith, textUpTo } from '../parsers.ts';

/** Holding a lease (the client's holdLease) and running a command are loaded by `lease run` alone. */
const runWithLease = later(() => import('../leaseRun/runWithLease.ts'), 'runWithLease');

/** How long a command whose lease ended from outside has between SIGTERM and SIGKILL, unless --grace says otherwise. */
const DEFAULT_GRACE_MS = 10_000;

/** `slipway lease run [options] -- COMMAND [ARGS...]`: see docs/cli.md, "Hold a lease while a command runs". */
export function addLeaseRunCommand(lease: Command): void {
  addLeaseRequestOptions(
    lease
      .command('run')
      .description(
        'hold a lease while a command runs: wait until it is active, run the command with the lease in its environment, and release it when the command exits',
      )
      .argument('<command...>', 'the command and its arguments, after -- (e.g. lease run --blueprint hosts -- make test)'),
    `default: ${formatDuration(DEFAULT_HEARTBEAT_MS)}; lease run beats it while the command runs`,
  )
    .option(
      '--grace <duration>',
      'when the lease ends from outside: how long the command has after SIGTERM before SIGKILL',
      parseWith(Duration),
      DEFAULT_GRACE_MS,
    )
    .option('--json-env <file>', 'also write the lease, its resource and the variables, as JSON, to this file')
    .option('--quiet', 'no progress lines on stderr (errors still)')
    .option('--reason <text>', 'why: recorded on the lease request', parseWith(textUpTo(1000)))
    .action((argv: string[], options: RunOptions, command: Command) => runWithLease(argv, options, command));
}
