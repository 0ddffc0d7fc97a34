import type { Figures } from './figures.ts';
import { integer, mib, ms, pair } from './format.ts';
import { EXPLAIN_P99_MS, type ExplanationFigures } from './explanations.ts';
import { PREEMPTION_BEYOND_GRACE_MS, type PreemptionFigures } from './preemption.ts';

/** One bar of the issue: what it asks, what the run measured, and whether that meets it (undefined: not measured). */
export interface Bar {
  readonly asks: string;
  readonly measured: string;
  readonly met: boolean | undefined;
}

/** PASS, FAIL, or n/a for a bar whose figure was not measured. */
export const verdict = (met: boolean | undefined) => (met === undefined ? 'n/a' : met ? 'PASS' : 'FAIL');

/** The rate of (e), (h) and (j) whose latency the bars set. */
const BAR_RATE = 200;

const ratio = (value: number, of: number) => `${(value / of).toFixed(2)} × (a)`;
const notAtBarRate = (rate: number) => (rate === BAR_RATE ? '' : ` (measured at ${rate}/s)`);

/** The issue's bars, as ratios and latencies within one run. */
export function bars(figures: Figures): Bar[] {
  const { baseline, append, cheapPath, slipway, api, service, peer, preemption, explanations } = figures;
  const atBarRate = slipway.releaseLatency.find((l) => l.targetRate === BAR_RATE);
  const peerRate = peer.tuned.activeReleases.perSecond;
  return [
    {
      asks: 'settled releases of active leases ≥ 0.10 × (a)',
      measured: ratio(slipway.activeReleases.perSecond, baseline.perSecond),
      met: slipway.activeReleases.perSecond >= 0.1 * baseline.perSecond,
    },
    {
      asks: `append→destroyed at ${BAR_RATE} releases/s: p50 ≤ 10 ms, p99 ≤ 50 ms`,
      measured: atBarRate ? pair(atBarRate) : `not measured (${BAR_RATE} is not in BENCH_LATENCY_RATES)`,
      met: atBarRate && atBarRate.p50Ms <= 10 && atBarRate.p99Ms <= 50,
    },
    {
      asks: 'lease created with a free slot active: p50 ≤ 20 ms',
      measured: ms(slipway.activation.p50Ms),
      met: slipway.activation.p50Ms <= 20,
    },
    {
      asks: "lease created with a free slot active: p50 ≤ 2 × the tuned peer's",
      measured: `${ms(slipway.activation.p50Ms)} vs ${ms(peer.tuned.activation.p50Ms)} (${(slipway.activation.p50Ms / peer.tuned.activation.p50Ms).toFixed(2)} ×)`,
      met: slipway.activation.p50Ms <= 2 * peer.tuned.activation.p50Ms,
    },
    {
      asks: `HTTP release ?wait=30 at ${BAR_RATE}/s: p99 ≤ 100 ms`,
      measured: `${ms(api.wait.p99Ms)}${notAtBarRate(api.wait.targetRate)}`,
      met: api.wait.targetRate === BAR_RATE ? api.wait.p99Ms <= 100 : undefined,
    },
    {
      // Slipway's half of "one command of an object at a time" is its drain's
      // per-object advisory lock, which the benchmark cannot watch from outside
      // (it uses public entry points only); the peer's is counted.
      asks: "Slipway settles ≥ 2 × the tuned peer's releases of active leases, one command of an object at a time",
      measured:
        `${(slipway.activeReleases.perSecond / peerRate).toFixed(2)} × (${integer(slipway.activeReleases.perSecond)} vs ${integer(peerRate)} /s); ` +
        `peer: ${integer(peer.tuned.jobs.overlapping)} of ${integer(peer.tuned.jobs.runs)} jobs overlapped one of the same object`,
      met: slipway.activeReleases.perSecond >= 2 * peerRate,
    },
    {
      asks: '(b) append ≥ 0.25 × (a)',
      measured: ratio(append.perSecond, baseline.perSecond),
      met: append.perSecond >= 0.25 * baseline.perSecond,
    },
    {
      asks: 'cheap path ≥ 0.25 × (a)',
      measured: ratio(cheapPath.perSecond, baseline.perSecond),
      met: cheapPath.perSecond >= 0.25 * baseline.perSecond,
    },
    {
      asks: 'worker RSS reported',
      measured: slipway.peakRssBytes.map(mib).join(' + '),
      met: slipway.peakRssBytes.length > 0 && slipway.peakRssBytes.every((bytes) => bytes > 0),
    },
    {
      asks: '(g) releases through the HTTP API ≥ 0.2 × (a)',
      measured: ratio(api.releases.perSecond, baseline.perSecond),
      met: api.releases.perSecond >= 0.2 * baseline.perSecond,
    },
    {
      asks: '(j) slipway start, idle release ?wait=30: p50 ≤ 8 ms',
      measured: ms(service.idleRelease.p50Ms),
      met: service.idleRelease.p50Ms <= 8,
    },
    {
      asks: '(j) slipway start, idle lease create ?wait=30 on a free slot: p50 ≤ 25 ms',
      measured: ms(service.idleCreate.p50Ms),
      met: service.idleCreate.p50Ms <= 25,
    },
    {
      asks: `(j) slipway start, release ?wait=30 at ${BAR_RATE}/s: p99 ≤ 100 ms`,
      measured: `${ms(service.wait.p99Ms)}${notAtBarRate(service.wait.targetRate)}`,
      met: service.wait.targetRate === BAR_RATE ? service.wait.p99Ms <= 100 : undefined,
    },
    {
      asks: `(j) slipway start, releases ?wait=30 by ${service.closedLoop.clients} closed loops ≥ 0.05 × (a)`,
      measured: ratio(service.closedLoop.perSecond, baseline.perSecond),
      met: service.closedLoop.perSecond >= 0.05 * baseline.perSecond,
    },
    preemptionBar(preemption),
    explanationBar(explanations),
  ];
}

/** (l)'s bar, of the main run's figures or of (k) and (l) run alone (bench/runPreemption.ts); undefined: a run before (l). */
export function explanationBar(explanations: ExplanationFigures | undefined): Bar {
  return {
    asks: `(l) lease explained through the API, 10,000 waiting at a preempting blueprint: p99 ≤ ${EXPLAIN_P99_MS} ms`,
    measured: explanations
      ? `${ms(explanations.p99Ms)} (p50 ${ms(explanations.p50Ms)}, ${explanations.count} explanations, ${integer(explanations.waiting)} waiting)`
      : 'not measured (a run before (l))',
    met: explanations && explanations.waiting >= 10_000 && explanations.p99Ms <= EXPLAIN_P99_MS,
  };
}

/** (k)'s bar, of the main run's figures or of (k) run alone (bench/runPreemption.ts); undefined: a run before (k). */
export function preemptionBar(preemption: PreemptionFigures | undefined): Bar {
  return {
    asks: `(k) urgent lease granted by preemption, 1,000 active and 1,000 waiting: within the grace period + ${PREEMPTION_BEYOND_GRACE_MS} ms (p99)`,
    measured: preemption
      ? `+${ms(preemption.beyondGrace.p99Ms)} (p50 +${ms(preemption.beyondGrace.p50Ms)}, ${preemption.count} leases)${preemption.untraced > 0 ? `; ${preemption.untraced} not traced` : ''}`
      : 'not measured (a run before (k))',
    met: preemption && preemption.untraced === 0 && preemption.beyondGrace.p99Ms <= PREEMPTION_BEYOND_GRACE_MS,
  };
}
