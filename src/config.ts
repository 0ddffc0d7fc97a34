import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_ALLOWED_HOSTS, parseAllowedHosts } from './callbacks/allowedHosts.ts';

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
  // Callbacks (see src/callbacks/): the hosts they may go to (loopback only
  // unless told otherwise; empty disables callbacks), the HMAC secret that
  // signs them (else one generated under SLIPWAY_HOME), and their retries.
  SLIPWAY_CALLBACK_ALLOWED_HOSTS: z
    .string()
    .default(DEFAULT_ALLOWED_HOSTS)
    .transform((text, ctx) => {
      try {
        return parseAllowedHosts(text);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: `${(error as Error).message}; expected a comma-separated list of hosts` });
        return z.NEVER;
      }
    }),
  SLIPWAY_CALLBACK_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  SLIPWAY_CALLBACK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(8),
  SLIPWAY_CALLBACK_BACKOFF_MS: positiveMs(5000),
  SLIPWAY_CALLBACK_MAX_BACKOFF_MS: positiveMs(3600 * 1000),
  SLIPWAY_CALLBACK_TIMEOUT_MS: positiveMs(10_000),
  // The collector (src/gc): how often it runs (minutes, on graphile-worker's
  // crontab; 0 turns the schedule off), how long an idle resource may be
  // kept while leases wait at its full blueprint, how long history of
  // destroyed objects is kept, and the bounds of one pass.
  SLIPWAY_GC_INTERVAL_MINUTES: z.coerce.number().int().min(0).max(60).default(1),
  SLIPWAY_GC_IDLE_GRACE_MS: z.coerce.number().int().min(0).max(7 * 24 * 3600 * 1000).default(60_000),
  SLIPWAY_GC_RETENTION_DAYS: z.coerce.number().positive().max(3650).default(30),
  SLIPWAY_GC_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
  SLIPWAY_GC_PASS_BUDGET_MS: positiveMs(30_000),
  // The HTTP API (see the README, "HTTP API").
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
  // How often a request waiting for commands (?wait) reads their state again
  // when no notice has come: notices are the fast path, this the backstop
  // for a LISTEN connection being made again.
  SLIPWAY_API_WAIT_REREAD_MS: z.coerce.number().int().min(100).max(300_000).default(1000),
  // How often the web UI's event stream sends a heartbeat comment, so proxies keep a quiet stream open.
  SLIPWAY_WEB_HEARTBEAT_MS: z.coerce.number().int().min(100).max(300_000).default(20_000),
  // How long an Idempotency-Key is remembered (at least 24 hours).
  SLIPWAY_API_IDEMPOTENCY_HOURS: z.coerce.number().int().min(24).max(24 * 365).default(24),
  // The CLI's remote mode (see the README, "Remote mode"): with SLIPWAY_URL set, its
  // lease and command subcommands call the HTTP API there with this token
  // instead of opening the database.
  SLIPWAY_URL: z
    .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL, e.g. http://127.0.0.1:7480' })
    .optional(),
  SLIPWAY_TOKEN: z
    .string()
    .regex(/^slw_[A-Za-z0-9_-]{20,200}$/, 'must be an API token as `slipway token create` prints it (slw_...)')
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = z.infer<typeof ConfigSchema> & { homeDir: string };

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  if (parsed.data.SLIPWAY_URL !== undefined && parsed.data.SLIPWAY_TOKEN === undefined) {
    throw new ConfigError('invalid configuration: SLIPWAY_TOKEN: must be set when SLIPWAY_URL is (an API token, slw_...)');
  }
  return { ...parsed.data, homeDir: path.resolve(parsed.data.SLIPWAY_HOME) };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}
