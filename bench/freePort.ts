import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';

/** A TCP port free on `host` a moment ago: the OS picks it, and it is let go for the caller's server to take. */
export async function freePort(host: string): Promise<number> {
  const server = createServer();
  server.listen(0, host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}
