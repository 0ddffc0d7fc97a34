import path from 'node:path';
import { z } from 'zod';

/**
 * Every setting Slipway reads from its environment, validated in one place so a
 * typo in a deployment fails at start with a message naming the variable,
 * instead of surfacing later as odd behaviour.
 */
const positiveMs = (fallback: number) =>
  z.coerce.number().int().positive().max(24 * 3600 * 1000).default(fallback);

const ConfigSchema = z.object({
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// connection URL')
    .optional(),
  SLIPWAY_HOME: z.string().min(1).default('.slipway'),
  SLIPWAY_WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
  // How often each worker's sweeper looks for objects nobody is draining.
  SLIPWAY_SWEEP_INTERVAL_MS: positiveMs(1000),
  // A command queued (or left running by a dead worker) for longer than this,
  // on an object whose advisory lock is free, gets its object woken again.
  SLIPWAY_STALE_AFTER_MS: positiveMs(3000),
  SLIPWAY_HEARTBEAT_MS: positiveMs(5000),
  // Test and chaos hook: each drained command waits a random 0..N ms before it
  // is applied, to widen race windows. 0 (the default) disables it.
  SLIPWAY_CHAOS_DRAIN_DELAY_MS: z.coerce.number().int().min(0).max(60_000).default(0),
  // The HTTP API (see NOTES-api.md / README "HTTP API").
  SLIPWAY_API_HOST: z.string().min(1).default('127.0.0.1'),
  SLIPWAY_API_PORT: z.coerce.number().int().min(0).max(65_535).default(7480),
  SLIPWAY_API_BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(10 * 1024 * 1024).default(64 * 1024),
  // Backpressure: an object with this many commands queued or running takes
  // no more (429), nor does Slipway with this many queued in all (503).
  SLIPWAY_API_QUEUE_DEPTH_LIMIT: z.coerce.number().int().min(1).max(1_000_000).default(100),
  SLIPWAY_API_BACKLOG_LIMIT: z.coerce.number().int().min(1).max(100_000_000).default(50_000),
  // Failed authentications one client address may make per minute before
  // it is answered 429 without its token being looked at.
  SLIPWAY_API_AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().min(1).max(100_000).default(20),
  // How long an Idempotency-Key is remembered (at least 24 hours).
  SLIPWAY_API_IDEMPOTENCY_HOURS: z.coerce.number().int().min(24).max(24 * 365).default(24),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = z.infer<typeof ConfigSchema> & { homeDir: string };

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  return { ...parsed.data, homeDir: path.resolve(parsed.data.SLIPWAY_HOME) };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}
