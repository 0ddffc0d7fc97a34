import net from 'node:net';
import pg from 'pg';
import { expect } from 'vitest';

/** A port nothing listens on: one the system just handed out and took back. */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `databaseUrl` moved to a TCP port where no server listens. */
export async function urlWithoutServer(databaseUrl: string): Promise<string> {
  const url = new URL(databaseUrl);
  url.port = String(await closedPort());
  url.searchParams.delete('host');
  return url.toString();
}

/** Terminates backend `pid` from a connection of its own, as an operator's pg_terminate_backend would, waiting until it is gone. */
export async function terminateBackend(databaseUrl: string, pid: number): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ done: boolean }>('select pg_terminate_backend($1, 60000) as done', [pid]);
    expect(rows[0]!.done).toBe(true);
  } finally {
    await client.end();
  }
}
