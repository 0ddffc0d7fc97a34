import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/** A count over a wall-clock window. */
export interface Throughput {
  readonly count: number;
  readonly seconds: number;
  readonly perSecond: number;
}

export function throughput(count: number, seconds: number): Throughput {
  return { count, seconds, perSecond: count / seconds };
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
 * window; the timeout turns a stuck engine into an error, not a hung run.
 */
export async function pollUntil(what: string, check: () => Promise<boolean>, timeoutMs: number, intervalMs = 50): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`benchmark timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(intervalMs);
  }
}
