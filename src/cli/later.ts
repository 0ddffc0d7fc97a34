type Later<F> = F extends (...args: infer A) => infer R ? (...args: A) => Promise<Awaited<R>> : never;

/**
 * An async export of another module, loaded when it is first called. Every
 * `slipway` call declares every subcommand, and runs one: what only some
 * subcommands run (the collector, migrations and graphile-worker, appending
 * commands and their metrics, the HTTP client) is loaded by those alone, so
 * the others do not pay for loading it (see docs/cli.md, "Start-up time").
 *
 *   const migrate = later(() => import('../../db/migrate.ts'), 'migrate');
 */
export function later<M, K extends keyof M>(load: () => Promise<M>, name: K): Later<M[K]> {
  const call = async (...args: unknown[]) => ((await load())[name] as (...args: unknown[]) => unknown)(...args);
  return call as Later<M[K]>;
}
