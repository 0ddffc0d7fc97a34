import type { Command } from 'commander';
import { CliFailure, EXIT } from '../exitStatus.ts';
import { later } from '../later.ts';
import { countBetween, parseWith } from '../parsers.ts';
import { withSession } from '../session.ts';
import { renderPass, renderPasses } from '../views/gcViews.ts';

/** The collector (and the metrics it records) is loaded by `gc` alone. */
const collector = () => import('../../gc/runCollector.ts');
const recentPasses = later(collector, 'recentPasses');

/** How many passes `gc status` shows by default. */
const STATUS_PASSES = 10;

export function addGcCommands(program: Command): void {
  const gc = program.command('gc').description('the garbage collector: lease expiry, reclaim of idle resources, warm minimum, retention');

  gc.command('run')
    .description('run one collector pass now and print what it found and asked for')
    .action((_options: unknown, command: Command) =>
      withSession(command, async ({ database, config, log, out }) => {
        const { gcSettings, runCollectorPass } = await collector();
        const pass = await runCollectorPass(database, gcSettings(config), 'cli', log);
        out.result(pass, renderPass);
        if (pass.status === 'failed') throw new CliFailure(`gc pass ${pass.id} failed: ${pass.message}`, EXIT.failed);
      }),
    );

  gc.command('status')
    .description('when recent passes ran and what they found, newest first; the latest in full')
    .option('--limit <n>', 'this many passes', parseWith(countBetween(1, 1000)), STATUS_PASSES)
    .action((options: { limit: number }, command: Command) =>
      withSession(command, async ({ db, config, out }) => {
        const passes = await recentPasses(db, options.limit);
        const schedule =
          config.SLIPWAY_GC_INTERVAL_MINUTES === 0
            ? 'not scheduled (SLIPWAY_GC_INTERVAL_MINUTES=0)'
            : `every ${config.SLIPWAY_GC_INTERVAL_MINUTES} minute(s)`;
        out.result({ schedule, passes }, ({ passes: list }) =>
          [`collector: ${schedule}`, renderPasses(list), ...(list[0] ? ['', renderPass(list[0])] : [])].join('\n'),
        );
      }),
    );
}
