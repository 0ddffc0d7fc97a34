/**
 * The settings every session Slipway opens starts with, whatever the
 * server's own configuration says: sent in the startup packet's `options`,
 * so they hold from a connection's first statement, through every
 * reconnect, at no round trip (docs/decisions/0030-slipway-sessions-never-jit.md).
 *
 * jit: Slipway's statements are short, keyed lookups and writes, where
 * compiling a plan with LLVM costs tens of milliseconds and saves
 * microseconds. PostgreSQL decides to compile by the plan's estimated cost,
 * and a lane's transactions run with sequential scans disabled (their plans
 * are kept while tables grow: src/drain/DrainLane.ts), so a plan that still
 * scans a small table carries the planner's disable cost, 10^10, and passes
 * every `jit_above_cost`. A server built with LLVM and `jit = on` (its
 * default; the embedded binaries have no LLVM) compiled such statements at
 * every execution.
 */
const SESSION_SETTINGS: Readonly<Record<string, string>> = { jit: 'off' };

/**
 * `url` with SESSION_SETTINGS, and `extra`, in its `options` parameter.
 * Options the URL already carries come last, so an operator's explicit
 * `options=-c jit=on` still wins (the last `-c` for a name is the one
 * PostgreSQL keeps).
 */
export function withSessionSettings(url: string, extra: Readonly<Record<string, string>> = {}): string {
  const withOptions = new URL(url);
  const ours = Object.entries({ ...SESSION_SETTINGS, ...extra }).map(([name, value]) => `-c ${name}=${value}`);
  const theirs = withOptions.searchParams.get('options');
  withOptions.searchParams.set('options', [...ours, ...(theirs ? [theirs] : [])].join(' '));
  return withOptions.toString();
}
