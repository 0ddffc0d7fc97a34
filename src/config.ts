import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_ALLOWED_HOSTS, parseAllowedHosts } from './domain/allowedHosts.ts';
import { IN_CHECKOUT } from './packageRoot.ts';

/**
 * Every setting Slipway reads from its environment, validated in one place so a
 * typo in a deployment fails at start with a message naming the variable,
 * instead of surfacing later as odd behaviour.
 */
const positiveMs = (fallback: number) =>
  z.coerce
    .number()
    .int()
    .positive()
    .max(24 * 3600 * 1000)
    .default(fallback);

/**
 * Each setting's `describe()` is its documentation: `npm run docs` writes the
 * configuration table of docs/operations.md from this schema.
 */
export const ConfigSchema = z.object({
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// connection URL')
    .optional()
    .describe('the PostgreSQL server to use; without it, the embedded server under `SLIPWAY_HOME`'),
  // No default here: it depends on where Slipway runs from (defaultHome).
  SLIPWAY_HOME: z
    .string()
    .min(1)
    .optional()
    .describe(
      "where the embedded PostgreSQL keeps its data and password, the first admin token's file and the generated callback secret; unset, `.slipway` in the working directory when run from a checkout, and for an installed package `$XDG_DATA_HOME/slipway` (`~/.local/share/slipway` without it), or `/var/lib/slipway` for root",
    ),
  SLIPWAY_WORKER_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .max(256)
    // One: a stream split over more lanes makes smaller steps, which cost more per command (docs/decisions/0029-one-lane-per-worker.md).
    .default(1)
    .describe(
      'drain lanes one worker process runs at once, each on a connection of its own and holding up to 64 objects of any kind, whose commands it applies in steps',
    ),
  SLIPWAY_DRAIN_POLL_MS: positiveMs(1000).describe(
    'how often each worker looks for due wake-ups without being signalled (the backstop for a lost signal; a wake-up due later is looked for when it is due)',
  ),
  // Each look is one statement of index reads; a worker also looks at the
  // nearest due time it read, so this bounds only the lateness of a
  // deadline set less than one poll before it passes.
  SLIPWAY_DUE_POLL_MS: positiveMs(1000).describe(
    "how often each worker's timekeeper looks for lease deadlines and health checks that fell due (it also looks at the nearest due time it knows of)",
  ),
  SLIPWAY_SWEEP_INTERVAL_MS: positiveMs(1000).describe("how often each worker's sweeper looks for objects nobody drains"),
  // A command queued (or left running by a dead worker) for longer than this,
  // on an object whose advisory lock is free, gets its object woken again.
  SLIPWAY_STALE_AFTER_MS: positiveMs(3000).describe('how overdue a command must be before the sweeper wakes its object again'),
  SLIPWAY_SHUTDOWN_GRACE_MS: positiveMs(30_000).describe(
    'how long a stopping worker lets its drains in flight (driver calls included) finish before it exits anyway, leaving their objects to other workers as after a crash',
  ),
  SLIPWAY_HEARTBEAT_MS: positiveMs(5000).describe('how often a worker renews its row in the worker registry'),
  // Test and chaos hook: each drained command waits a random 0..N ms before it
  // is applied, to widen race windows. 0 (the default) disables it.
  SLIPWAY_CHAOS_DRAIN_DELAY_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(60_000)
    .default(0)
    .describe('testing only: a random pause of up to this many ms before each drained command'),
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
    })
    .describe('the hosts callbacks may be sent to (loopback only by default); empty disables callbacks'),
  SLIPWAY_CALLBACK_SECRET: z
    .string()
    .min(32, 'must be at least 32 characters')
    .optional()
    .describe('the HMAC key that signs callbacks; without it, one generated in `SLIPWAY_HOME/callback-secret`'),
  SLIPWAY_CALLBACK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(8).describe('attempts before a callback is given up'),
  SLIPWAY_CALLBACK_BACKOFF_MS: positiveMs(5000).describe("the wait before a callback's 2nd attempt; doubled for each one after"),
  SLIPWAY_CALLBACK_MAX_BACKOFF_MS: positiveMs(3600 * 1000).describe('the longest wait between two attempts of a callback'),
  SLIPWAY_CALLBACK_TIMEOUT_MS: positiveMs(10_000).describe('how long one callback attempt may take'),
  // The collector (src/gc): how often it runs (minutes, on graphile-worker's
  // crontab; 0 turns the schedule off), how long an idle resource may be
  // kept while leases wait at its full blueprint, how long history of
  // destroyed objects is kept, and the bounds of one pass.
  SLIPWAY_GC_INTERVAL_MINUTES: z.coerce
    .number()
    .int()
    .min(0)
    .max(60)
    .default(1)
    .describe('how often the collector runs; 0: only when `slipway gc run` asks'),
  SLIPWAY_GC_IDLE_GRACE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(7 * 24 * 3600 * 1000)
    .default(60_000)
    .describe('how long a resource must have been idle before the collector reclaims it for waiting leases'),
  SLIPWAY_GC_RETENTION_DAYS: z.coerce
    .number()
    .positive()
    .max(3650)
    .default(30)
    .describe('how long destroyed objects, their history and collector pass records are kept'),
  SLIPWAY_GC_BATCH_SIZE: z.coerce
    .number()
    .int()
    .min(1)
    .max(10_000)
    .default(500)
    .describe('rows one step of a collector pass looks at, or prunes per batch'),
  SLIPWAY_GC_PASS_BUDGET_MS: positiveMs(30_000).describe('a collector pass starts no new work after this long'),
  SLIPWAY_GC_ORPHAN_GRACE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(7 * 24 * 3600 * 1000)
    .default(300_000)
    .describe(
      'how long something a driver lists (a thing, or a slot on a live resource) must have gone unmatched (in two passes at least) before the collector destroys it as an orphan; and how long a destroyed resource or lease still accounts for what is listed',
    ),
  // On by default: where autovacuum will not look after a table of
  // Slipway's (off for the server or for that table), nothing else would,
  // and a queue's dead rows and stale statistics slow every hop.
  SLIPWAY_GC_MAINTAIN_TABLES: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('true')
    .transform((value) => value === 'true')
    .describe(
      "vacuum and analyze Slipway's tables that autovacuum does not look after (it is off for the server, or for the table), at PostgreSQL's own thresholds, in each collector pass, and analyze them after migrations; `false`: leave them to the operator",
    ),
  // The HTTP API (see docs/api.md).
  SLIPWAY_API_HOST: z.string().min(1).default('127.0.0.1').describe('the address the HTTP API and the web UI listen on'),
  SLIPWAY_API_PORT: z.coerce.number().int().min(0).max(65_535).default(7480).describe('their port; 0 picks a free one'),
  SLIPWAY_API_BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(10 * 1024 * 1024)
    .default(64 * 1024)
    .describe('the largest request body (413 above it)'),
  // Backpressure: an object with this many commands queued or running takes
  // no more (429), nor does Slipway with this many queued in all (503).
  SLIPWAY_API_QUEUE_DEPTH_LIMIT: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(100)
    .describe('commands queued or running on one object before the API answers 429'),
  SLIPWAY_API_BACKLOG_LIMIT: z.coerce
    .number()
    .int()
    .min(1)
    .max(100_000_000)
    .default(50_000)
    .describe('commands queued or running in all before the API answers 503'),
  SLIPWAY_API_AUTH_FAILURES_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .max(100_000)
    .default(20)
    .describe('failed authentications per client address and minute before that address is answered 429'),
  // Notices are the fast path; this is the backstop while the LISTEN
  // connection is being made again.
  SLIPWAY_API_WAIT_REREAD_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(300_000)
    .default(1000)
    .describe('how often a request waiting for commands (?wait) reads their state again when no notice has come'),
  // Proxies close a stream that stays quiet for too long.
  SLIPWAY_WEB_HEARTBEAT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(300_000)
    .default(20_000)
    .describe("how often the web UI's event stream sends a heartbeat comment"),
  SLIPWAY_API_IDEMPOTENCY_HOURS: z.coerce
    .number()
    .int()
    .min(24)
    .max(24 * 365)
    .default(24)
    .describe('how long Idempotency-Keys are kept'),
  // Prometheus metrics (see docs/metrics.md).
  SLIPWAY_METRICS_TOKEN: z
    .string()
    .regex(/^[\x21-\x7e]{16,200}$/, 'must be 16 to 200 printable characters, no spaces')
    .optional()
    .describe('when set, `GET /metrics` (on the API port and on the worker metrics port) needs `Authorization: Bearer <this>`; unset, it is public'),
  SLIPWAY_METRICS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65_535)
    .optional()
    .describe(
      'a process running only a worker (`slipway worker`) serves `GET /metrics` on this port, on `SLIPWAY_API_HOST`; unset, it serves none (0 picks a free one). `slipway start` and `slipway api` serve metrics on the API port',
    ),
  // The CLI's remote mode (see docs/cli.md, "Remote mode"): with SLIPWAY_URL set, its
  // lease and command subcommands call the HTTP API there with this token
  // instead of opening the database.
  SLIPWAY_URL: z
    .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL, e.g. http://127.0.0.1:7480' })
    .optional()
    .describe("the CLI's remote mode: its lease and command subcommands call the HTTP API at this URL instead of opening the database"),
  SLIPWAY_TOKEN: z
    .string()
    .regex(/^slw_[A-Za-z0-9_-]{20,200}$/, 'must be an API token as `slipway token create` prints it (slw_...)')
    .optional()
    .describe("the API token the CLI's remote mode sends; required with `SLIPWAY_URL`"),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .describe('the pino log level; logs are JSON lines on stderr'),
  // Off by default: `npm start` shows its terminal to a person, and two JSON
  // lines per request buried the service's own lines. Failed requests are
  // logged either way.
  SLIPWAY_LOG_REQUESTS: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('false')
    .transform((value) => value === 'true')
    .describe("log each HTTP request (fastify's lines, at info, with secrets in URLs redacted); failed requests are logged either way"),
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
  return { ...parsed.data, homeDir: path.resolve(parsed.data.SLIPWAY_HOME ?? defaultHome(env)) };
}

/**
 * SLIPWAY_HOME when it is not set. A checkout keeps its data beside the
 * source, in `.slipway` (`npm start` runs from the checkout's root). An
 * installed package cannot: its directory belongs to npm and is replaced by
 * the next install, so its data goes where a user's applications keep
 * theirs (the XDG base directories), or, for root, where a system's
 * services keep theirs, which the `postgres` user that runs the embedded
 * server as root can reach (root's home directory is closed to it).
 */
export function defaultHome(env: NodeJS.ProcessEnv = process.env, inCheckout = IN_CHECKOUT, uid = os.userInfo().uid): string {
  if (inCheckout) return '.slipway';
  if (uid === 0) return '/var/lib/slipway';
  const dataHome = env.XDG_DATA_HOME;
  // The XDG spec: a relative XDG_DATA_HOME is invalid and is ignored.
  return path.join(dataHome && path.isAbsolute(dataHome) ? dataHome : path.join(os.homedir(), '.local', 'share'), 'slipway');
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}
