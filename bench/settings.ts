import { z } from 'zod';

const count = (fallback: number, min = 1) => z.coerce.number().int().min(min).max(10_000_000).default(fallback);

/**
 * The benchmark's sizes, from the environment. The defaults are the issue's
 * sizes; they are also what the printed reproduce command spells out, so a
 * run with overrides can be repeated exactly.
 */
const SettingsSchema = z.object({
  /** Leases created, released in (b) and drained in (c); also the row count of (a) and job count of (d). */
  BENCH_LEASES: count(20_000),
  /** Concurrent database clients in (a) and (b). */
  BENCH_CLIENTS: count(16),
  /** Worker processes in (c) and (e), each running one SlipwayWorker. */
  BENCH_WORKERS: count(2),
  /** Open-loop append rate of (e), commands per second. */
  BENCH_LATENCY_RATE: count(200),
  /** How long (e) appends at that rate, in seconds. */
  BENCH_LATENCY_SECONDS: count(15),
});

export type BenchSettings = z.infer<typeof SettingsSchema>;

export function loadBenchSettings(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  const parsed = SettingsSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid benchmark settings: ${problems}`);
  }
  return parsed.data;
}
