import { bars, verdict } from './bars.ts';
import { type Cell, figureRows } from './figureRows.ts';
import type { Figures } from './figures.ts';
import { integer } from './format.ts';
import { jitsOrdinarySessions, type ServerInfo } from './server.ts';
import type { BenchSettings } from './settings.ts';

const minutesAndSeconds = (seconds: number) => {
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)} min ${whole % 60} s`;
};

/**
 * Slipway settings whose value is a secret, or a place on this machine:
 * figures files are published (bench/results/), so the command line says
 * these were set, not to what.
 */
const NOT_REPEATED = /SECRET|TOKEN|PASSWORD|_HOME$|_URL$/;

/** The command line that repeats a run: every benchmark size, and any Slipway setting that was overridden. */
export function reproduceCommand(settings: BenchSettings, env: NodeJS.ProcessEnv = process.env): string {
  const assignments = [
    ...(env.DATABASE_URL ? [['DATABASE_URL', '<same server>']] : []),
    ...Object.entries(settings),
    ...Object.entries(env)
      .filter(([name]) => name.startsWith('SLIPWAY_'))
      .map(([name, value]) => [name, NOT_REPEATED.test(name) ? '<set>' : value]),
  ].map(([name, value]) => `${name}=${value}`);
  return `${assignments.join(' ')} npm run bench`;
}

/** A line of the figures table: Slipway's value and its ratio, the tuned peer's (or blanks), and a note. */
function line(label: string, slipway: string, slipwayRatio: string, peer = '', peerRatio = '', note = ''): string {
  return `  ${label.padEnd(58)} ${slipway.padStart(22)} ${slipwayRatio.padStart(7)} ${peer.padStart(18)} ${peerRatio.padStart(7)}   ${note}`.trimEnd();
}

const ratioOf = (cell: Cell | undefined) => cell?.ofBaseline ?? cell?.p50OfBaseline ?? '';

/** Formats one run's figures: machine, the figures of Slipway and the tuned peer side by side, the bars. */
export function formatReport(figures: Figures): string {
  const { machine, server, settings, cheapPath, slipway, peer } = figures;
  const { tuned, defaults } = peer;

  return [
    'Slipway benchmark',
    '',
    'Machine',
    `  cpu          ${machine.cores} cores, ${machine.cpuModel}; ${(machine.memoryBytes / 2 ** 30).toFixed(1)} GiB RAM`,
    `  os / node    ${machine.platform}; Node ${machine.node}`,
    `  code         ${machine.revision}`,
    `  load         1-min load average ${machine.loadAverage.toFixed(1)} at start, ${figures.loadAverageAtEnd.toFixed(1)} at end`,
    `  PostgreSQL   ${server.version} (${server.embedded ? 'embedded' : 'DATABASE_URL'}); synchronous_commit=${machine.synchronousCommit}, fsync=${machine.fsync}`,
    `  JIT          ${jitLine(server)}`,
    `  clients      ${settings.BENCH_CLIENTS} concurrent connections in the closed-loop figures`,
    `  Slipway      ${cheapPath.concurrency.length} worker processes, drain concurrency ${cheapPath.concurrency.join(' + ')}; (j) one \`slipway start\` process`,
    `  peer         graphile-worker alone, ${tuned.concurrency.length} processes, tuned: concurrency ${tuned.concurrency.join(' + ')}, local queue, batched completion`,
    `  run          ${figures.startedAt}, ${minutesAndSeconds(figures.runSeconds)}, setup included`,
    `  reproduce    ${figures.reproduce}`,
    '',
    "Throughput (× (a): ratio to the baseline rate) and latency (× (a): p50 over the baseline insert's p50)",
    line('Figure', 'Slipway', '× (a)', 'peer (tuned)', '× (a)'),
    ...figureRows(figures).map((row) =>
      line(row.label, row.slipway?.value ?? '', ratioOf(row.slipway), row.peer?.value ?? '', ratioOf(row.peer), row.note),
    ),
    '',
    'One command of an object at a time',
    `  Slipway      its drain holds the object's advisory lock (not observable from outside); ${slipway.failedCommands} commands failed during the run, ${figures.service.failedCommands} during (j)`,
    `  peer tuned   ${integer(tuned.jobs.overlapping)} of ${integer(tuned.jobs.runs)} jobs started while another job of the same object ran; ${tuned.jobs.failed} jobs failed (retried); its runners stopped on a fatal error and were restarted ${tuned.jobs.runnerRestarts} times`,
    ...(defaults
      ? [
          `  peer default ${integer(defaults.jobs.overlapping)} of ${integer(defaults.jobs.runs)} jobs overlapped; ${defaults.jobs.failed} failed; ${defaults.jobs.runnerRestarts} runner restarts`,
        ]
      : []),
    '',
    'Bars (within this run)',
    ...bars(figures).map((bar) => `  ${verdict(bar.met).padEnd(5)} ${bar.asks}: ${bar.measured}`),
  ].join('\n');
}

/** What an ordinary session (one that sets nothing) gets from the server; Slipway's own sessions run with jit off. */
function jitLine(server: ServerInfo): string {
  const compiles = jitsOrdinarySessions(server) ? 'an ordinary session JIT-compiles costly plans' : 'an ordinary session does not JIT-compile';
  return `pg_jit_available() ${server.jitAvailable}, jit = ${server.jit}: ${compiles}`;
}
