import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';

/** A count over a wall-clock window. */
export const ThroughputSchema = z.object({
  count: z.number(),
  seconds: z.number(),
  perSecond: z.number(),
});
export type Throughput = z.infer<typeof ThroughputSchema>;

export function throughput(count: number, seconds: number): Throughput {
  return { count, seconds, perSecond: count / seconds };
}

/** The two percentiles every latency figure reports, in milliseconds. */
export const PercentilesSchema = z.object({ p50Ms: z.number(), p99Ms: z.number() });
export type Percentiles = z.infer<typeof PercentilesSchema>;

export function percentiles(samples: readonly number[]): Percentiles {
  return { p50Ms: percentile(samples, 50), p99Ms: percentile(samples, 99) };
}

/** The least, the middle and the most of a few samples, in milliseconds: for figures of a handful of requests, where a p99 would be the maximum. */
export const SpreadSchema = z.object({ count: z.number(), minMs: z.number(), p50Ms: z.number(), maxMs: z.number() });
export type Spread = z.infer<typeof SpreadSchema>;

export function spread(samples: readonly number[]): Spread {
  return { count: samples.length, minMs: Math.min(...samples), p50Ms: percentile(samples, 50), maxMs: Math.max(...samples) };
}

/**
 * Runs `work(0) … work(total - 1)` one after another, pausing `gapMs` after
 * each, so that each meets a system with nothing else in hand; returns
 * each one's duration in milliseconds.
 */
export async function oneAtATime(total: number, gapMs: number, work: (index: number) => Promise<unknown>): Promise<number[]> {
  const durations: number[] = [];
  for (let n = 0; n < total; n++) {
    durations.push((await timed(() => work(n))).ms);
    await sleep(gapMs);
  }
  return durations;
}

/**
 * Runs `work(0) … work(total - 1)` from `clients` concurrent loops, each
 * starting the next index as soon as its previous one finished (closed loop),
 * and returns how long the whole batch took.
 */
export async function runClients(clients: number, total: number, work: (index: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const loop = async () => {
    while (next < total) await work(next++);
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(clients, total) }, loop));
  return (performance.now() - started) / 1000;
}

/** What an open loop sent: each send's scheduled time (performance.now()), its result, and the rate kept. */
export interface OpenLoopRun<T> {
  readonly dueAt: readonly number[];
  readonly results: readonly T[];
  /** Sends per second from the first to the last (the generator catches up when late, never skips). */
  readonly achievedRate: number;
}

/**
 * Starts `send(n)` at n / rate seconds from now, for n below `total`, never
 * waiting for earlier sends to finish (open loop); a late timer is caught up
 * at once, never skipped. So a slow system (or a late generator) shows up as
 * latency counted from the scheduled times, instead of silently lowering the
 * offered rate. Resolves once every send has.
 */
export async function openLoop<T>(total: number, rate: number, send: (n: number) => Promise<T>): Promise<OpenLoopRun<T>> {
  const started = performance.now();
  const dueAt: number[] = [];
  const pending: Promise<T>[] = [];
  for (let n = 0; n < total; n++) {
    dueAt[n] = started + (n * 1000) / rate;
    const wait = dueAt[n]! - performance.now();
    if (wait > 0) await sleep(wait);
    const result = send(n);
    // Awaited below; this only keeps Node from calling a failure unhandled while the loop is still sending.
    result.catch(() => undefined);
    pending.push(result);
  }
  const sendSeconds = (performance.now() - started) / 1000;
  return { dueAt, results: await Promise.all(pending), achievedRate: total > 1 ? (total - 1) / sendSeconds : total };
}

/** Runs `work` and also returns its duration in milliseconds. */
export async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/**
 * Polls `check` every `intervalMs` until it returns true. The interval bounds
 * how much a timed window can overrun, so callers keep it small against the
 * window; the timeout turns a stuck system into an error, not a hung run.
 */
export async function pollUntil(what: string, check: () => Promise<boolean>, timeoutMs: number, intervalMs = 50): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`benchmark timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(intervalMs);
  }
}
