/**
 * What only `start`, `worker`, `api`, `db migrate`, `gc`, the subcommands
 * that change or wait, and remote mode load: a file a call loads that
 * matches one of these is loaded at start-up for nothing (docs/cli.md,
 * "Start-up time"). The TypeScript source and the build (dist/src/...js)
 * alike.
 */
export const NOT_AT_START_UP: readonly RegExp[] = [
  /\/node_modules\/(fastify|graphile-worker|prom-client|@opentelemetry\/api)\//,
  /\/migrations\/\d{4}_\w+\.(ts|js)$/,
  /\/src\/(api\/server|worker\/SlipwayWorker|gc\/|metrics\/|client\/|queue\/appendCommand|read\/waitForSettled|drain\/handlers\/)/,
];

/** The packages every other call loads, which a lone `slipway --version` does without. */
export const NOT_FOR_VERSION = /\/node_modules\/(commander|zod|kysely|pg|pino)\//;
