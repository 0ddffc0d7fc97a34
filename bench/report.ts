import { bars } from './bars.ts';
import type { Figures } from './figures.ts';
import { integer, mib, pair, perSecond, times } from './format.ts';
import type { MilestoneLatency } from './latency.ts';
import type { Throughput } from './measure.ts';
import type { BenchSettings } from './settings.ts';

const batch = (t: Throughput) => `${integer(t.count)} in ${t.seconds.toFixed(1)} s`;
const verdict = (met: boolean | undefined) => (met === undefined ? 'n/a' : met ? 'PASS' : 'FAIL');
const minutesAndSeconds = (seconds: number) => {
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)} min ${whole % 60} s`;
};

/** The command line that repeats a run: every benchmark size, and any Slipway setting that was overridden. */
export function reproduceCommand(settings: BenchSettings, env: NodeJS.ProcessEnv = process.env): string {
  const assignments = [
    ...(env.DATABASE_URL ? [['DATABASE_URL', '<same server>']] : []),
    ...Object.entries(settings),
    ...Object.entries(env).filter(([name]) => name.startsWith('SLIPWAY_')),
  ].map(([name, value]) => `${name}=${value}`);
  return `${assignments.join(' ')} npm run bench`;
}

/** A row of the figures table: Slipway's value and its ratio, the tuned peer's (or blanks), and a note. */
function row(label: string, slipway: string, slipwayRatio: string, peer = '', peerRatio = '', note = ''): string {
  return `  ${label.padEnd(50)} ${slipway.padStart(18)} ${slipwayRatio.padStart(7)} ${peer.padStart(18)} ${peerRatio.padStart(7)}   ${note}`.trimEnd();
}

/** Formats one run's figures: machine, the figures of Slipway and the tuned peer side by side, the bars. */
export function formatReport(figures: Figures): string {
  const { machine, settings, baseline, append, cheapPath, slipway, api, peer } = figures;
  const { tuned, defaults } = peer;
  const ofBaseline = (t: Throughput) => times(t.perSecond, baseline.perSecond);
  const latencyRatio = (l: { p50Ms: number }) => times(l.p50Ms, baseline.p50Ms);
  const latencyRows = (label: string, ours: MilestoneLatency, theirs: MilestoneLatency | undefined) =>
    row(
      label,
      pair(ours),
      latencyRatio(ours),
      theirs ? pair(theirs) : '',
      theirs ? latencyRatio(theirs) : '',
      `settled ${integer(ours.settledRate)}/s` +
        (theirs ? ` vs ${integer(theirs.settledRate)}/s` : '') +
        ` of ${integer(ours.targetRate)}/s offered (sent at ${integer(ours.achievedRate)}/s)`,
    );
  const { done, cancelled, coalesced, failed } = cheapPath.settled;

  return [
    'Slipway benchmark',
    '',
    'Machine',
    `  cpu          ${machine.cores} cores, ${machine.cpuModel}; ${(machine.memoryBytes / 2 ** 30).toFixed(1)} GiB RAM`,
    `  os / node    ${machine.platform}; Node ${machine.node}`,
    `  code         ${machine.revision}`,
    `  load         1-min load average ${machine.loadAverage.toFixed(1)} at start, ${figures.loadAverageAtEnd.toFixed(1)} at end`,
    `  PostgreSQL   ${machine.postgres} (${figures.server}); synchronous_commit=${machine.synchronousCommit}, fsync=${machine.fsync}`,
    `  clients      ${settings.BENCH_CLIENTS} concurrent connections in the closed-loop figures`,
    `  Slipway      ${cheapPath.concurrency.length} worker processes, drain concurrency ${cheapPath.concurrency.join(' + ')}`,
    `  peer         graphile-worker alone, ${tuned.concurrency.length} processes, tuned: concurrency ${tuned.concurrency.join(' + ')}, local queue, batched completion`,
    `  run          ${figures.startedAt}, ${minutesAndSeconds(figures.runSeconds)}, setup included`,
    `  reproduce    ${figures.reproduce}`,
    '',
    "Throughput (× (a): ratio to the baseline rate) and latency (× (a): p50 over the baseline insert's p50)",
    row('Figure', 'Slipway', '× (a)', 'peer (tuned)', '× (a)'),
    row(
      '(a) baseline: durable 1-row insert transactions',
      perSecond(baseline),
      '1.00',
      '',
      '',
      `${batch(baseline)}; insert latency p50 / p99 ${pair(baseline)}`,
    ),
    row('(b) append: releases appended, 1 transaction each', perSecond(append), ofBaseline(append), '', '', batch(append)),
    row(
      '(c) lifecycles: created → active → destroyed',
      perSecond(slipway.lifecycle.lifecycles),
      ofBaseline(slipway.lifecycle.lifecycles),
      perSecond(tuned.lifecycle.lifecycles),
      ofBaseline(tuned.lifecycle.lifecycles),
      `${integer(slipway.lifecycle.leases)} leases on ${integer(slipway.lifecycle.slots)} slots; ${slipway.lifecycle.lifecycles.seconds.toFixed(1)} s vs ${tuned.lifecycle.lifecycles.seconds.toFixed(1)} s`,
    ),
    row(
      '(c) settled releases of active leases',
      perSecond(slipway.activeReleases),
      ofBaseline(slipway.activeReleases),
      perSecond(tuned.activeReleases),
      ofBaseline(tuned.activeReleases),
      `${batch(slipway.activeReleases)} vs ${batch(tuned.activeReleases)}; released at once`,
    ),
    row(
      '(c) cheap path: commands settled',
      perSecond(cheapPath),
      ofBaseline(cheapPath),
      '',
      '',
      `${batch(cheapPath)}: ${integer(done)} done, ${integer(cancelled)} cancelled, ${integer(coalesced)} coalesced` +
        (failed > 0 ? `; ${integer(failed)} FAILED (not counted)` : '') +
        '; releases of pending leases, drained in batches',
    ),
    ...(defaults
      ? [
          row(
            '(d) peer on graphile-worker defaults: releases',
            '',
            '',
            perSecond(defaults.activeReleases),
            ofBaseline(defaults.activeReleases),
            `${batch(defaults.activeReleases)}; concurrency ${defaults.concurrency.join(' + ')}, no local queue; ` +
              `${integer(defaults.jobs.overlapping)} of ${integer(defaults.jobs.runs)} jobs overlapped one of the same object`,
          ),
        ]
      : []),
    ...slipway.releaseLatency.map((ours) =>
      latencyRows(
        `(e) append→destroyed p50 / p99 at ${integer(ours.targetRate)}/s`,
        ours,
        tuned.releaseLatency.find((theirs) => theirs.targetRate === ours.targetRate),
      ),
    ),
    latencyRows('(i) created on a free slot → active p50 / p99', slipway.activation, tuned.activation),
    row(
      '(f) peak RSS of each worker process',
      slipway.peakRssBytes.map(mib).join(' + '),
      '',
      tuned.peakRssBytes.map(mib).join(' + '),
      '',
      'sampled every 100 ms while the workers ran',
    ),
    row(
      '(g) releases through the HTTP API (202)',
      perSecond(api.releases),
      ofBaseline(api.releases),
      '',
      '',
      `${batch(api.releases)}, after ${integer(settings.BENCH_API_WARMUP)} untimed; ${settings.BENCH_CLIENTS} keep-alive clients, no worker running`,
    ),
    row(
      `(h) HTTP release ?wait=30 at ${integer(api.wait.targetRate)}/s: answer p50 / p99`,
      pair(api.wait),
      latencyRatio(api.wait),
      '',
      '',
      `${integer(api.wait.requests)} releases of active leases sent at ${integer(api.wait.achievedRate)}/s; ` +
        `${integer(api.wait.timedOut)} answered 202 (not settled within 30 s)`,
    ),
    '',
    'One command of an object at a time',
    `  Slipway      its drain holds the object's advisory lock (not observable from outside); ${slipway.failedCommands} commands failed during the run`,
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
