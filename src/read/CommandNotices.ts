import type pg from 'pg';
import { z } from 'zod';
import { COMMANDS_CHANNEL } from '../drain/commitOutcome.ts';
import type { PartHealth } from '../health/ProcessHealth.ts';
import { waitBeforeReconnect } from '../health/reconnectDelay.ts';

/** What the drain announces when a command settles or yields. */
const NoticeSchema = z.object({
  id: z.number().int().positive(),
  /** "<kind>:<id>" of the command's target. */
  target: z.string(),
  status: z.string(),
});
export type CommandNotice = z.infer<typeof NoticeSchema>;

/**
 * One waiter's view of the drain's notices: it lets the waiter sleep until a
 * notice it cares about arrives. Fed by a NoticeListener, which may serve
 * many waiters from one LISTEN connection (the API server does).
 *
 * Notices are kept from one `clear()` to the next rather than handed out
 * once: a waiter clears, reads the state, then asks whether anything relevant
 * to what it just read arrived meanwhile. A notice that landed during the read
 * (say, for a command the read revealed) is thus never lost.
 */
export class CommandNotices {
  private received: CommandNotice[] = [];
  /** Notices may have been missed since the last `clear()`: the state must be read again. */
  private resynced = false;
  private arrived: (() => void) | undefined;

  constructor(private readonly onClose: () => Promise<void>) {}

  /**
   * LISTENs on a connection of its own, for a process with one waiter (the
   * CLI). Closing the notices closes the connection.
   */
  static async listen(pool: pg.Pool): Promise<CommandNotices> {
    const listener = await NoticeListener.open(pool);
    return listener.subscribe(() => listener.close());
  }

  /** Called by the listener with every notice. */
  deliver(notice: CommandNotice): void {
    this.received.push(notice);
    this.arrived?.();
  }

  /** Called by the listener when notices may have been lost: whatever the waiter waits for, it must look again. */
  resync(): void {
    this.resynced = true;
    this.arrived?.();
  }

  /** Forgets the notices received so far: the caller is about to read the current state. */
  clear(): void {
    this.received = [];
    this.resynced = false;
  }

  /**
   * Resolves once a notice received since the last `clear()` matches (or
   * notices may have been missed), or after `ms`, or when `signal` aborts,
   * whichever comes first.
   */
  async waitFor(matches: (notice: CommandNotice) => boolean, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.resynced || this.received.some(matches) || signal?.aborted) return;
    await new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', finish);
        this.arrived = undefined;
        resolve();
      };
      const timer = setTimeout(finish, ms);
      signal?.addEventListener('abort', finish);
      this.arrived = () => {
        if (this.resynced || matches(this.received[this.received.length - 1]!)) finish();
      };
    });
  }

  async close(): Promise<void> {
    this.arrived = undefined;
    await this.onClose();
  }
}

/**
 * LISTENs on the drain's channel on a dedicated connection (LISTEN belongs to
 * a session, so it cannot share pooled connections) and hands every notice
 * to each subscribed waiter. A server opens one per process, however many
 * requests wait at once.
 *
 * When the connection drops (a PostgreSQL restart, a failover, a killed
 * backend) it is made again, with backoff, for as long as the listener is
 * open. Notices sent meanwhile are lost, so once it listens again every
 * waiter is told to read afresh, and every watcher to look again; until
 * then waiters fall back to their timed re-reads.
 */
export class NoticeListener {
  private readonly subscribers = new Set<CommandNotices>();
  private readonly watchers = new Set<Watcher>();
  private client: pg.PoolClient | undefined;
  private readonly closing = new AbortController();
  private reconnecting: Promise<void> | undefined;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly health: PartHealth | undefined,
  ) {}

  /** Listens, or fails if it cannot now; `health` hears of every drop and return. */
  static async open(pool: pg.Pool, health?: PartHealth): Promise<NoticeListener> {
    const listener = new NoticeListener(pool, health);
    await listener.connect();
    return listener;
  }

  /** A waiter's notices; closing them unsubscribes (and runs `onClose`, if given). */
  subscribe(onClose?: () => Promise<void>): CommandNotices {
    const notices: CommandNotices = new CommandNotices(async () => {
      this.subscribers.delete(notices);
      await onClose?.();
    });
    this.subscribers.add(notices);
    return notices;
  }

  /**
   * Calls `onNotice` with every notice, and `onResync` when notices may have
   * been missed (the connection was made again), until the returned function
   * is called (the web UI's change feed).
   */
  watch(onNotice: (notice: CommandNotice) => void, onResync: () => void): () => void {
    const watcher = { onNotice, onResync };
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  async close(): Promise<void> {
    this.closing.abort();
    await this.reconnecting;
    this.subscribers.clear();
    this.watchers.clear();
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    let failure: Error | undefined;
    try {
      await client.query(`unlisten ${COMMANDS_CHANNEL}`);
    } catch (error) {
      // A connection that cannot unlisten is discarded rather than pooled.
      failure = error as Error;
    }
    client.release(failure);
  }

  private async connect(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query(`listen ${COMMANDS_CHANNEL}`);
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    client.on('notification', (message) => {
      if (message.channel !== COMMANDS_CHANNEL) return;
      const notice = parseNotice(message.payload);
      if (!notice) return;
      for (const subscriber of this.subscribers) subscriber.deliver(notice);
      for (const watcher of this.watchers) watcher.onNotice(notice);
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
      for (const subscriber of this.subscribers) subscriber.resync();
      for (const watcher of this.watchers) watcher.onResync();
      return;
    }
  }
}

interface Watcher {
  readonly onNotice: (notice: CommandNotice) => void;
  readonly onResync: () => void;
}

function parseNotice(payload: string | undefined): CommandNotice | undefined {
  try {
    const parsed = NoticeSchema.safeParse(JSON.parse(payload ?? ''));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
