import { once } from 'node:events';
import net from 'node:net';

/**
 * A TCP proxy on a loopback port, standing in for the virtual IP (or the
 * `-rw` service) that clients of a replicated PostgreSQL connect to. Each
 * connection is forwarded to the current upstream port. `switchTo` points
 * it at another server and cuts every connection it carries, as a moved
 * address does: the clients find out when their next read or write fails,
 * and their reconnects reach the new upstream. With no upstream (between
 * the old server's death and the switch) a connection is closed at once,
 * as an address that nothing answers on refuses it.
 */
export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  /** Connections forwarded so far, for a test that wants to see traffic moved. */
  connections = 0;

  private constructor(
    private readonly server: net.Server,
    private upstream: number | undefined,
  ) {}

  static async start(upstream: number | undefined): Promise<TcpProxy> {
    const server = net.createServer();
    const proxy = new TcpProxy(server, upstream);
    server.on('connection', (client) => proxy.forward(client));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return proxy;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Forwards new connections to `upstream` (none: refuse them) and cuts the ones open now. */
  switchTo(upstream: number | undefined): void {
    this.upstream = upstream;
    for (const socket of this.sockets) socket.destroy();
  }

  private forward(client: net.Socket): void {
    if (this.upstream === undefined) {
      client.destroy();
      return;
    }
    this.connections++;
    const server = net.connect({ host: '127.0.0.1', port: this.upstream });
    // Either side closing or failing ends both: a half-open pair would look
    // to the client like a server that stopped answering.
    const end = () => {
      client.destroy();
      server.destroy();
      this.sockets.delete(client);
      this.sockets.delete(server);
    };
    for (const socket of [client, server]) {
      this.sockets.add(socket);
      socket.on('error', end);
      socket.on('close', end);
    }
    client.pipe(server);
    server.pipe(client);
  }

  async close(): Promise<void> {
    this.switchTo(undefined);
    this.server.close();
    await once(this.server, 'close');
  }
}
