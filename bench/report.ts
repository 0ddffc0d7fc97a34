import type { ApiLatencyResult } from './apiBench.ts';
import type { BaselineResult } from './baseline.ts';
import type { DrainResult } from './drain.ts';
import type { LatencyResult } from './latency.ts';
import type { MachineInfo } from './machine.ts';
import type { Throughput } from './measure.ts';
import type { BenchSettings } from './settings.ts';

export interface BenchResults {
  readonly machine: MachineInfo;
  readonly server: string;
  readonly settings: BenchSettings;
  readonly baseline: BaselineResult;
  readonly append: Throughput;
  readonly drain: DrainResult;
  readonly graphile: Throughput;
  readonly latency: LatencyResult;
  readonly apiReleases: Throughput;
  readonly apiLatency: ApiLatencyResult;
  /** 1-minute load average when the run ended. */
  readonly loadAverageAtEnd: number;
  /** Wall time of the whole run, setup included. */
  readonly runSeconds: number;
}

/** Issue 2's bar: append and drain each at least this fraction of the baseline. */
const MIN_FRACTION_OF_BASELINE = 0.25;
/** Issue 3's bar: releases through the HTTP API at least this fraction of the baseline. */
const MIN_API_FRACTION_OF_BASELINE = 0.2;

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const perSecond = (t: Throughput) => `${integer.format(t.perSecond)} /s`;
const batch = (t: Throughput) => `${integer.format(t.count)} in ${t.seconds.toFixed(1)} s`;
const ms = (value: number) => value.toFixed(1);
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
/** value / of, with about three significant digits. */
const times = (value: number, of: number) => {
  const r = value / of;
  return r.toFixed(r < 10 ? 2 : r < 100 ? 1 : 0);
};
const met = (ok: boolean) => (ok ? 'MET' : 'NOT MET');
const minutesAndSeconds = (seconds: number) => {
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)} min ${whole % 60} s`;
};

/** The command line that repeats this run: every benchmark size, and any Slipway setting that was overridden. */
export function reproduceCommand(settings: BenchSettings, env: NodeJS.ProcessEnv = process.env): string {
  const assignments = [
    ...(env.DATABASE_URL ? [['DATABASE_URL', '<same server>']] : []),
    ...Object.entries(settings),
    ...Object.entries(env).filter(([name]) => name.startsWith('SLIPWAY_')),
  ].map(([name, value]) => `${name}=${value}`);
  return `${assignments.join(' ')} npm run bench`;
}

/** One line of the figures table: what, value, ratio to (a), and how it was obtained. */
function figure(label: string, value: string, ratio: string, note = ''): string {
  return `  ${label.padEnd(52)}${value.padStart(18)}${ratio.padStart(14)}   ${note}`.trimEnd();
}

/** Formats a finished run: machine, the six figures with their ratio to (a), and the bar. */
export function formatReport(results: BenchResults, reproduce: string): string {
  const { machine, settings, baseline, append, drain, graphile, latency, apiReleases, apiLatency } = results;
  const { done, cancelled, coalesced, failed } = drain.settled;
  const appendRatio = append.perSecond / baseline.perSecond;
  const drainRatio = drain.perSecond / baseline.perSecond;
  const apiRatio = apiReleases.perSecond / baseline.perSecond;
  const latencyPair = (p50: number, p99: number) => `${ms(p50)} / ${ms(p99)} ms`;
  const latencyRatio = (p50: number, p99: number) => `${times(p50, baseline.p50Ms)} / ${times(p99, baseline.p99Ms)}`;

  return [
    'Slipway benchmark',
    '',
    'Machine',
    `  cpu          ${machine.cores} cores, ${machine.cpuModel}; ${(machine.memoryBytes / 2 ** 30).toFixed(1)} GiB RAM`,
    `  os / node    ${machine.platform}; Node ${machine.node}`,
    `  code         ${machine.revision}`,
    `  load         1-min load average ${machine.loadAverage.toFixed(1)} at start, ${results.loadAverageAtEnd.toFixed(1)} at end`,
    `  PostgreSQL   ${machine.postgres} (${results.server}); synchronous_commit=${machine.synchronousCommit}, fsync=${machine.fsync}`,
    `  clients      ${settings.BENCH_CLIENTS} concurrent connections in (a) and (b)`,
    `  workers      ${drain.concurrency.length} SlipwayWorker processes (forked), drain concurrency ${drain.concurrency.join(' + ')}, in (c) and (e)`,
    `  run time     ${minutesAndSeconds(results.runSeconds)}, setup included`,
    `  reproduce    ${reproduce}`,
    '',
    figure('Figure', 'value', '× (a)'),
    figure('(a) baseline: durable 1-row insert transactions', perSecond(baseline), '1.00', batch(baseline)),
    figure('(b) append: releases appended, 1 transaction each', perSecond(append), times(append.perSecond, baseline.perSecond), batch(append)),
    figure('(c) drain: commands settled by the workers', perSecond(drain), times(drain.perSecond, baseline.perSecond),
      `${batch(drain)}: ${integer.format(done)} done, ${integer.format(cancelled)} cancelled, ${integer.format(coalesced)} coalesced` +
        (failed > 0 ? `; ${integer.format(failed)} FAILED (not counted)` : '')),
    figure('(d) graphile-worker alone: no-op jobs, defaults', perSecond(graphile), times(graphile.perSecond, baseline.perSecond),
      `${batch(graphile)}; 1 runner, concurrency 1`),
    figure('(e) append→done latency p50 / p99, client-side', latencyPair(latency.p50Ms, latency.p99Ms), latencyRatio(latency.p50Ms, latency.p99Ms),
      `${integer.format(latency.commands)} releases of active leases sent at ${integer.format(latency.achievedRate)}/s ` +
        `(target ${latency.targetRate}/s), all settled at ${integer.format(latency.settledRate)}/s`),
    figure('    the same, in the database (finished − created)', latencyPair(latency.dbP50Ms, latency.dbP99Ms), latencyRatio(latency.dbP50Ms, latency.dbP99Ms),
      `ratios to (a)'s insert latency p50 / p99 = ${latencyPair(baseline.p50Ms, baseline.p99Ms)}`),
    figure('(f) peak RSS of each worker process during (c)', drain.peakRssBytes.map(mib).join(' + '), 'n/a', 'sampled every 100 ms'),
    figure('(g) releases through the HTTP API (202)', perSecond(apiReleases), times(apiReleases.perSecond, baseline.perSecond),
      `${batch(apiReleases)}; ${settings.BENCH_CLIENTS} keep-alive clients, no worker running`),
    figure('(h) API response time p50 / p99 at a steady load', latencyPair(apiLatency.p50Ms, apiLatency.p99Ms), latencyRatio(apiLatency.p50Ms, apiLatency.p99Ms),
      `${integer.format(apiLatency.requests)} releases sent at ${integer.format(apiLatency.achievedRate)}/s (target ${apiLatency.targetRate}/s), workers running`),
    figure('    ?wait response time for a release done at once', latencyPair(apiLatency.waitP50Ms, apiLatency.waitP99Ms), latencyRatio(apiLatency.waitP50Ms, apiLatency.waitP99Ms),
      `${apiLatency.waitSamples} requests, one at a time, each answered when its tree settled`),
    '',
    `Bar: append and drain each ≥ ${MIN_FRACTION_OF_BASELINE} × (a), drain faster than (d)`,
    `  append ≥ ${MIN_FRACTION_OF_BASELINE} × (a)   ${appendRatio.toFixed(2)} × (a)   ${met(appendRatio >= MIN_FRACTION_OF_BASELINE)}`,
    `  drain  ≥ ${MIN_FRACTION_OF_BASELINE} × (a)   ${drainRatio.toFixed(2)} × (a)   ${met(drainRatio >= MIN_FRACTION_OF_BASELINE)}`,
    `  drain  > (d)          ${perSecond(drain)} vs ${perSecond(graphile)}   ${met(drain.perSecond > graphile.perSecond)}`,
    `Bar (HTTP API): releases through the API ≥ ${MIN_API_FRACTION_OF_BASELINE} × (a)`,
    `  API    ≥ ${MIN_API_FRACTION_OF_BASELINE} × (a)    ${apiRatio.toFixed(2)} × (a)   ${met(apiRatio >= MIN_API_FRACTION_OF_BASELINE)}`,
  ].join('\n');
}
