import type pg from 'pg';
import type { PartHealth } from '../health/ProcessHealth.ts';
import { waitBeforeReconnect } from '../health/reconnectDelay.ts';

/** What a listener is told: each payload on its channel, and that payloads may have been missed. */
export interface ChannelHandlers {
  onMessage(payload: string | undefined): void;
  onResync(): void;
}

/** The handlers of each channel a listener listens on, by channel name. */
export type ChannelHandlersByName = Readonly<Record<string, ChannelHandlers>>;

/**
 * LISTENs on its channels on one dedicated connection (LISTEN belongs to a
 * session, so it cannot share pooled connections).
 *
 * When the connection drops (a PostgreSQL restart, a failover, a killed
 * backend) it is made again, with backoff, for as long as the listener is
 * open. Payloads sent meanwhile are lost, so once it listens again every
 * channel's handlers are told to resync. `health` hears of every drop and return.
 */
export class ChannelListener {
  private client: pg.PoolClient | undefined;
  private readonly closing = new AbortController();
  private reconnecting: Promise<void> | undefined;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly channels: ChannelHandlersByName,
    private readonly health: PartHealth | undefined,
  ) {}

  /** Listens, or fails if it cannot now. */
  static async open(pool: pg.Pool, channels: ChannelHandlersByName, health?: PartHealth): Promise<ChannelListener> {
    const listener = new ChannelListener(pool, channels, health);
    await listener.connect();
    return listener;
  }

  async close(): Promise<void> {
    this.closing.abort();
    await this.reconnecting;
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    let failure: Error | undefined;
    try {
      await client.query('unlisten *');
    } catch (error) {
      // A connection that cannot unlisten is discarded rather than pooled.
      failure = error as Error;
    }
    client.release(failure);
  }

  private async connect(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query(
        Object.keys(this.channels)
          .map((channel) => `listen ${channel}`)
          .join('; '),
      );
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    client.on('notification', (message) => {
      this.channels[message.channel]?.onMessage(message.payload);
    });
    client.once('error', (error) => this.lost(client, error));
    client.once('end', () => this.lost(client, new Error('the LISTEN connection ended')));
    this.client = client;
  }

  private lost(client: pg.PoolClient, error: Error): void {
    if (this.client !== client || this.closing.signal.aborted) return;
    this.client = undefined;
    client.release(error);
    this.health?.down(error);
    this.reconnecting = this.reconnect().finally(() => {
      this.reconnecting = undefined;
    });
  }

  private async reconnect(): Promise<void> {
    for (let attempt = 0; await waitBeforeReconnect(attempt, this.closing.signal); attempt++) {
      try {
        await this.connect();
      } catch (error) {
        this.health?.down(error);
        continue;
      }
      this.health?.up();
      for (const handlers of Object.values(this.channels)) handlers.onResync();
      return;
    }
  }
}
