/**
 * What only `start`, `worker`, `api`, `db migrate`, `gc`, the subcommands
 * that change or wait, and remote mode load: a file a call loads that
 * matches one of these is loaded at start-up for nothing (docs/cli.md,
 * "Start-up time"). The TypeScript source and the build alike: the build's
 * bundled files stand for the source modules they hold
 * (test/helpers/sourceModules.ts).
 */
export const NOT_AT_START_UP: readonly RegExp[] = [
  /\/node_modules\/(fastify|graphile-worker|prom-client|@opentelemetry\/api)\//,
  /\/migrations\/\d{4}_\w+\.(ts|js)$/,
  /\/src\/(server\/|worker\/SlipwayWorker|gc\/|metrics\/|client\/|queue\/appendCommand|read\/waitForSettled|drain\/handlers\/)/,
];

/** The packages every other call loads, which a lone `slipway --version` does without. */
export const NOT_FOR_VERSION = /\/node_modules\/(commander|zod|kysely|pg|pino)\//;

/**
 * What a remote call (SLIPWAY_URL) has no use for: the database's
 * connections, writing objects and appending commands, the drain, the
 * service, the metrics, and the packages only they need. The TypeScript
 * source's launcher loads kysely, pg and pino before tsx's hooks whatever
 * the call (src/cli/bin.mjs), so those three count for the build alone.
 */
export const NOT_IN_REMOTE_MODE: readonly RegExp[] = [
  /\/node_modules\/(fastify|graphile-worker|prom-client|@opentelemetry\/api)\//,
  /\/src\/(db\/(Database|EmbeddedDatabase|PreparingClient)|drain\/|queue\/appendCommand|objects\/(create|update)|metrics\/|gc\/|worker\/SlipwayWorker|server\/)/,
];
export const NOT_IN_REMOTE_MODE_BUILT = /\/node_modules\/(kysely|pg|pino)\//;
