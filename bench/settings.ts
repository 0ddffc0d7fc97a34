import { z } from 'zod';

const count = (fallback: number, min = 1) => z.coerce.number().int().min(min).max(10_000_000).default(fallback);

/** A comma-separated list of rates in the environment ("50,200,1000"); a list in a figures file. */
const rates = (fallback: readonly number[]) =>
  z.preprocess(
    (value) => (typeof value === 'string' ? value.split(',').map((rate) => rate.trim()) : value),
    z
      .array(z.coerce.number().int().min(1).max(100_000))
      .min(1)
      .default([...fallback]),
  );

/**
 * The benchmark's sizes, from the environment. The defaults are the issue's
 * sizes; they are also what the printed reproduce command spells out, so a
 * run with overrides can be repeated exactly. The same schema reads them back
 * from a figures file (bench/figures.ts).
 */
export const SettingsSchema = z.object({
  BENCH_LEASES: count(20_000).describe('rows of (a); pending leases released in (b) and drained on the cheap path; releases through the API in (g)'),
  BENCH_CLIENTS: count(16).describe('concurrent database clients (and API callers) of the closed-loop figures'),
  BENCH_WORKERS: count(2).describe('Slipway worker processes'),
  BENCH_PEER_WORKERS: count(2).describe('worker processes of the peer (graphile-worker alone)'),
  BENCH_PEER_CONCURRENCY: count(16).describe('jobs each tuned peer process runs at once'),
  BENCH_LIFECYCLE_LEASES: count(5_000).describe(
    'leases taken through the whole lifecycle in (c), and active leases released at once in (c), per system',
  ),
  BENCH_LIFECYCLE_RESOURCES: count(10).describe('resources of the lifecycle pool in (c)'),
  BENCH_LIFECYCLE_SLOTS: count(50).describe('slots per resource of the lifecycle pool; fewer slots than leases, so leases wait'),
  BENCH_LATENCY_RATES: rates([50, 200, 1_000]).describe('offered rates of (e), releases of active leases per second, each for BENCH_LATENCY_SECONDS'),
  BENCH_LATENCY_SECONDS: count(15).describe('how long each open-loop figure offers its load: (e), (h), (i) and (j)'),
  BENCH_ACTIVATION_RATE: count(20).describe('leases created per second on a pool with free slots, in (i)'),
  BENCH_API_WAIT_RATE: count(200).describe('releases per second through POST …/commands?wait=30, in (h) and (j)'),
  BENCH_SERVICE_RELEASES: count(2_000).describe('releases of active leases through POST …/commands?wait=30 by the closed-loop clients of (j)'),
  BENCH_API_WARMUP: count(5_000, 0).describe(
    "releases through the API before (g)'s timed ones, untimed, so (g) times a server past its first requests' compiling",
  ),
  BENCH_PREEMPTION_ACTIVE: count(1_000).describe('active leases filling the preempting blueprint of (k), priorities 0–4'),
  BENCH_PREEMPTION_WAITING: count(1_000, 0).describe('leases waiting in its line in (k), priorities 0–4, too low to preempt'),
  BENCH_PREEMPTION_URGENT: count(50).describe('urgent leases of (k), priority 9, each granted by preempting an active lease'),
  BENCH_PREEMPTION_RATE: count(5).describe('urgent leases created per second in (k)'),
  BENCH_PREEMPTION_GRACE_MS: count(1_000, 0).describe(
    "the preempting blueprint's grace period in (k), in ms: each victim's holder keeps its lease that long",
  ),
  BENCH_EXPLAIN_WAITING: count(10_000).describe("leases waiting in (k)'s line while (l) explains them (its own added to (k)'s)"),
  BENCH_EXPLAIN_COUNT: count(200).describe('explanations timed in (l), one at a time through GET /v1/leases/{id}/explanation'),
  BENCH_PEER_DEFAULTS_LEASES: count(300, 0).describe(
    'active leases released at once by the peer on graphile-worker defaults, in (d); 0 leaves that run out',
  ),
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

/** The settings a run changed from the issue's sizes, as NAME=value; none for a run at the defaults. */
export function overriddenSettings(settings: BenchSettings): string[] {
  const defaults: Record<string, unknown> = SettingsSchema.parse({});
  return Object.entries(settings)
    .filter(([name, value]) => JSON.stringify(value) !== JSON.stringify(defaults[name]))
    .map(([name, value]) => `${name}=${value}`);
}
