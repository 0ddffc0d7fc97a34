import type { Command } from 'commander';
import { loadConfig } from '../../config.ts';
import type { Output } from '../output.ts';
import { outputOf, type Session, withSession } from '../session.ts';
import { interrupted } from '../shutdown.ts';
import type { Transport } from './Transport.ts';

/**
 * Runs a lease or command subcommand over the HTTP API when SLIPWAY_URL is
 * set (no database is opened then), else over the database. Each mode loads
 * its own transport only: a local call never loads the HTTP client and the
 * API's contract, a remote one never loads the database code.
 */
export async function withTransport(command: Command, work: (transport: Transport, out: Output) => Promise<void>): Promise<void> {
  const config = loadConfig();
  if (config.SLIPWAY_URL === undefined) {
    const { LocalTransport } = await import('./LocalTransport.ts');
    return withSession(command, (session) => work(new LocalTransport(session), session.out));
  }
  const out = outputOf(command);
  const [{ SlipwayClient }, { RemoteTransport }] = await Promise.all([import('../../client/SlipwayClient.ts'), import('./RemoteTransport.ts')]);
  // loadConfig refuses a SLIPWAY_URL without SLIPWAY_TOKEN.
  const api = new SlipwayClient({ baseUrl: config.SLIPWAY_URL, token: config.SLIPWAY_TOKEN!, signal: interrupted });
  return work(new RemoteTransport(api, out), out);
}

/**
 * The database's transport for a command that always works on the database,
 * loaded when it runs: the modules that declare subcommands are imported at
 * every call, remote ones included, and this one loads the query builder.
 */
export async function localTransportOf(session: Session): Promise<Transport> {
  const { LocalTransport } = await import('./LocalTransport.ts');
  return new LocalTransport(session);
}
