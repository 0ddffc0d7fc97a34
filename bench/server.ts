import pg from 'pg';
import { z } from 'zod';

/**
 * The PostgreSQL server a run measured: which release, whether the
 * benchmark started it (the embedded binaries) or found it at DATABASE_URL,
 * and whether it JIT-compiles an ordinary session's plans. The last is read
 * on a plain connection, without the session settings Slipway sends
 * (src/db/sessionSettings.ts), so it says what the server does to a client
 * that sets nothing: the trap Slipway's own sessions avoid.
 */
export const ServerSchema = z.object({
  /** True when the run started the embedded server under .slipway/bench. */
  embedded: z.boolean(),
  /** `server_version`, e.g. "15.20 (Debian 15.20-0+deb12u1)". */
  version: z.string(),
  /** The major release, from `server_version_num`. */
  major: z.number(),
  /** `pg_jit_available()`: the server was built with LLVM and can load it. */
  jitAvailable: z.boolean(),
  /** `show jit` in an ordinary session. */
  jit: z.string(),
});
export type ServerInfo = z.infer<typeof ServerSchema>;

/** Reads what the figures depend on about the server at `url`, on a connection of its own. */
export async function describeServer(url: string, embedded: boolean): Promise<ServerInfo> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const version = await client.query<{ version: string; num: string }>(
      `select current_setting('server_version') as version, current_setting('server_version_num') as num`,
    );
    const available = await client.query<{ available: boolean }>('select pg_jit_available() as available');
    const jit = await client.query<{ jit: string }>('show jit');
    return {
      embedded,
      version: version.rows[0]!.version,
      major: Math.floor(Number(version.rows[0]!.num) / 10_000),
      jitAvailable: available.rows[0]!.available,
      jit: jit.rows[0]!.jit,
    };
  } finally {
    await client.end();
  }
}

/** True when an ordinary session on the server JIT-compiles plans whose estimates pass `jit_above_cost`. */
export const jitsOrdinarySessions = (server: ServerInfo) => server.jitAvailable && server.jit === 'on';

/** How the report and the docs name the server: "embedded PostgreSQL 17.6, no JIT", "PostgreSQL 15.20, JIT on". */
export function serverTitle(server: ServerInfo): string {
  const release = server.version.split(' ')[0];
  const jit = jitsOrdinarySessions(server) ? 'JIT on' : server.jitAvailable ? 'JIT off' : 'no JIT';
  return `${server.embedded ? 'embedded ' : ''}PostgreSQL ${release}, ${jit}`;
}
