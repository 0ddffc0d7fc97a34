import type pg from 'pg';
import { z } from 'zod';
import { COMMANDS_CHANNEL } from '../drain/commitOutcome.ts';

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

  /** Forgets the notices received so far: the caller is about to read the current state. */
  clear(): void {
    this.received = [];
  }

  /**
   * Resolves once a notice received since the last `clear()` matches, or
   * after `ms`, or when `signal` aborts, whichever comes first.
   */
  async waitFor(matches: (notice: CommandNotice) => boolean, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.received.some(matches) || signal?.aborted) return;
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
        if (matches(this.received[this.received.length - 1]!)) finish();
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
 */
export class NoticeListener {
  private readonly subscribers = new Set<CommandNotices>();
  private readonly watchers = new Set<(notice: CommandNotice) => void>();

  private constructor(private readonly client: pg.PoolClient) {
    client.on('notification', (message) => {
      if (message.channel !== COMMANDS_CHANNEL) return;
      const notice = parseNotice(message.payload);
      if (!notice) return;
      for (const subscriber of this.subscribers) subscriber.deliver(notice);
      for (const watcher of this.watchers) watcher(notice);
    });
  }

  static async open(pool: pg.Pool): Promise<NoticeListener> {
    const client = await pool.connect();
    try {
      await client.query(`listen ${COMMANDS_CHANNEL}`);
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    return new NoticeListener(client);
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

  /** Calls `onNotice` with every notice until the returned function is called (the web UI's change feed). */
  watch(onNotice: (notice: CommandNotice) => void): () => void {
    this.watchers.add(onNotice);
    return () => this.watchers.delete(onNotice);
  }

  async close(): Promise<void> {
    this.subscribers.clear();
    this.watchers.clear();
    let failure: Error | undefined;
    try {
      await this.client.query(`unlisten ${COMMANDS_CHANNEL}`);
    } catch (error) {
      // A connection that cannot unlisten is discarded rather than pooled.
      failure = error as Error;
    }
    this.client.release(failure);
  }
}

function parseNotice(payload: string | undefined): CommandNotice | undefined {
  try {
    const parsed = NoticeSchema.safeParse(JSON.parse(payload ?? ''));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
