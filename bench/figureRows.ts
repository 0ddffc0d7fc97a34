import type { Figures } from './figures.ts';
import { integer, mib, ms, pair, perSecond, times } from './format.ts';
import type { MilestoneLatency } from './latency.ts';
import type { Spread, Throughput } from './measure.ts';

/** One system's value of a figure. */
export interface Cell {
  readonly value: string;
  /** A rate over the baseline's: × (a). */
  readonly ofBaseline?: string;
  /** A latency's p50 over the baseline insert's p50, the report's yardstick for latencies. */
  readonly p50OfBaseline?: string;
  /** The rate an open loop settled at, e.g. "199/s". */
  readonly settled?: string;
}

/** One figure of a run: Slipway's value, the tuned peer's where it has one, and what the report adds about how it was measured. */
export interface FigureRow {
  readonly label: string;
  readonly slipway?: Cell;
  readonly peer?: Cell;
  readonly note?: string;
}

const batch = (t: Throughput) => `${integer(t.count)} in ${t.seconds.toFixed(1)} s`;
const minP50Max = (s: Spread) => `${s.minMs.toFixed(1)} / ${s.p50Ms.toFixed(1)} / ${s.maxMs.toFixed(1)} ms`;

/**
 * Every figure of a run, in the order the report prints them: the one list
 * that the terminal report (report.ts) and the published table
 * (scripts/docs/benchmarkFigures.ts) are made from.
 */
export function figureRows(figures: Figures): FigureRow[] {
  const { settings, baseline, append, cheapPath, slipway, api, service, peer, preemption, explanations } = figures;
  const { tuned, defaults } = peer;
  const rate = (t: Throughput): Cell => ({ value: perSecond(t), ofBaseline: times(t.perSecond, baseline.perSecond) });
  const latency = (l: MilestoneLatency): Cell => ({
    value: pair(l),
    p50OfBaseline: times(l.p50Ms, baseline.p50Ms),
    settled: `${integer(l.settledRate)}/s`,
  });
  const latencyRow = (label: string, ours: MilestoneLatency, theirs: MilestoneLatency | undefined): FigureRow => ({
    label,
    slipway: latency(ours),
    ...(theirs ? { peer: latency(theirs) } : {}),
    note:
      `settled ${integer(ours.settledRate)}/s` +
      (theirs ? ` vs ${integer(theirs.settledRate)}/s` : '') +
      ` of ${integer(ours.targetRate)}/s offered (sent at ${integer(ours.achievedRate)}/s)`,
  });
  const { done, cancelled, coalesced, failed } = cheapPath.settled;

  return [
    {
      label: '(a) baseline: durable 1-row insert transactions',
      slipway: { value: perSecond(baseline), ofBaseline: '1.00' },
      note: `${batch(baseline)}; insert latency p50 / p99 ${pair(baseline)}`,
    },
    { label: '(b) append: releases appended, 1 transaction each', slipway: rate(append), note: batch(append) },
    {
      label: '(c) lifecycles: created → active → destroyed',
      slipway: rate(slipway.lifecycle.lifecycles),
      peer: rate(tuned.lifecycle.lifecycles),
      note: `${integer(slipway.lifecycle.leases)} leases on ${integer(slipway.lifecycle.slots)} slots; ${slipway.lifecycle.lifecycles.seconds.toFixed(1)} s vs ${tuned.lifecycle.lifecycles.seconds.toFixed(1)} s`,
    },
    {
      label: '(c) settled releases of active leases',
      slipway: rate(slipway.activeReleases),
      peer: rate(tuned.activeReleases),
      note: `${batch(slipway.activeReleases)} vs ${batch(tuned.activeReleases)}; released at once`,
    },
    {
      label: '(c) cheap path: commands settled',
      slipway: rate(cheapPath),
      note:
        `${batch(cheapPath)}: ${integer(done)} done, ${integer(cancelled)} cancelled, ${integer(coalesced)} coalesced` +
        (failed > 0 ? `; ${integer(failed)} FAILED (not counted)` : '') +
        '; releases of pending leases, drained in batches',
    },
    ...(defaults
      ? [
          {
            label: '(d) peer on graphile-worker defaults: releases',
            peer: rate(defaults.activeReleases),
            note:
              `${batch(defaults.activeReleases)}; concurrency ${defaults.concurrency.join(' + ')}, no local queue; ` +
              `${integer(defaults.jobs.overlapping)} of ${integer(defaults.jobs.runs)} jobs overlapped one of the same object`,
          },
        ]
      : []),
    ...slipway.releaseLatency.map((ours) =>
      latencyRow(
        `(e) append→destroyed p50 / p99 at ${integer(ours.targetRate)}/s`,
        ours,
        tuned.releaseLatency.find((theirs) => theirs.targetRate === ours.targetRate),
      ),
    ),
    latencyRow('(i) created on a free slot → active p50 / p99', slipway.activation, tuned.activation),
    {
      label: '(f) peak RSS of each worker process',
      slipway: { value: slipway.peakRssBytes.map(mib).join(' + ') },
      peer: { value: tuned.peakRssBytes.map(mib).join(' + ') },
      note: 'sampled every 100 ms while the workers ran',
    },
    {
      label: '(g) releases through the HTTP API (202)',
      slipway: rate(api.releases),
      note: `${batch(api.releases)}, after ${integer(settings.BENCH_API_WARMUP)} untimed; ${settings.BENCH_CLIENTS} keep-alive clients, no worker running`,
    },
    {
      label: `(h) HTTP release ?wait=30 at ${integer(api.wait.targetRate)}/s: answer p50 / p99`,
      slipway: { value: pair(api.wait), p50OfBaseline: times(api.wait.p50Ms, baseline.p50Ms), settled: `${integer(api.wait.settledRate)}/s` },
      note:
        `${integer(api.wait.requests)} releases of active leases sent at ${integer(api.wait.achievedRate)}/s; ` +
        `${integer(api.wait.timedOut)} answered 202 (not settled within 30 s)`,
    },
    {
      label: '(j) slipway start: idle create ?wait=30, min / p50 / max',
      slipway: { value: minP50Max(service.idleCreate) },
      note: `${service.idleCreate.count} leases on free slots, one at a time`,
    },
    {
      label: '(j) slipway start: idle release ?wait=30, min / p50 / max',
      slipway: { value: minP50Max(service.idleRelease) },
      note: `${service.idleRelease.count} releases of active leases, one at a time`,
    },
    {
      label: `(j) slipway start: release ?wait=30 at ${integer(service.wait.targetRate)}/s, p50 / p99`,
      slipway: {
        value: pair(service.wait),
        p50OfBaseline: times(service.wait.p50Ms, baseline.p50Ms),
        settled: `${integer(service.wait.settledRate)}/s`,
      },
      note:
        `settled ${integer(service.wait.settledRate)}/s; ${integer(service.wait.requests)} sent at ${integer(service.wait.achievedRate)}/s; ` +
        `${integer(service.wait.timedOut)} answered 202 (not settled within 30 s)`,
    },
    {
      label: `(j) slipway start: releases ?wait=30 by ${service.closedLoop.clients} closed loops`,
      slipway: rate(service.closedLoop),
      note: `${batch(service.closedLoop)}; ${integer(service.closedLoop.timedOut)} answered 202 (not settled within 30 s)`,
    },
    ...(preemption
      ? [
          {
            label: '(k) preemption: urgent lease granted beyond its grace period, p50 / p99',
            slipway: { value: pair(preemption.beyondGrace) },
            note:
              `${preemption.count} urgent leases at ${integer(settings.BENCH_PREEMPTION_RATE)}/s on ${integer(settings.BENCH_PREEMPTION_ACTIVE)} active + ` +
              `${integer(settings.BENCH_PREEMPTION_WAITING)} waiting, grace ${integer(preemption.graceMs)} ms; request → victim chosen ${pair(preemption.chosen)}; ` +
              `victim released after its end ${pair(preemption.victimEndLate)}; victim's release → grant ${pair(preemption.afterVictimEnd)}`,
          },
        ]
      : []),
    ...(explanations
      ? [
          {
            label: '(l) lease explained through the API, p50 / p99',
            slipway: { value: pair(explanations) },
            note:
              `${explanations.count} leases drawn from ${integer(explanations.waiting)} waiting at (k)'s blueprint, one at a time; max ${ms(explanations.maxMs)}; ` +
              `${explanations.preemptingPriority} named the priority that would preempt for them`,
          },
        ]
      : []),
  ];
}
