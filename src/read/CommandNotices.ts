import type pg from 'pg';
import { z } from 'zod';
import { type ChannelHandlers, type ChannelHandlersByName, ChannelListener } from '../db/ChannelListener.ts';
import { COMMANDS_CHANNEL } from '../db/channels.ts';
import type { PartHealth } from '../health/ProcessHealth.ts';

/** What the drain announces when a command settles or yields. */
const NoticeSchema = z.object({
  id: z.number().int().positive(),
  /** "<kind>:<id>" of the command's target. */
  target: z.string(),
  status: z.string(),
  /**
   * The commands it caused, as its settling left them (see
   * src/queue/announcements.ts); absent or null when the notice cannot
   * tell (a cancellation, too many to list, a worker of an older release).
   */
  caused: z.array(z.number().int().positive()).nullish(),
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

  /** The notices received since the last `clear()`, oldest first. */
  get sinceClear(): readonly CommandNotice[] {
    return this.received;
  }

  /** Notices may have been missed since the last `clear()`. */
  get lost(): boolean {
    return this.resynced;
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
 * Hands every notice of the drain's channel (a ChannelListener of its own) to
 * each subscribed waiter and watcher. A server opens one per process,
 * however many requests wait at once. When notices may have been lost (the
 * connection was made again), every waiter is told to read afresh and every
 * watcher to look again; until then waiters fall back to their timed re-reads.
 */
export class NoticeListener {
  private readonly subscribers = new Set<CommandNotices>();
  private readonly watchers = new Set<Watcher>();
  private listener: ChannelListener | undefined;

  private constructor() {}

  /**
   * Listens, or fails if it cannot now; `health` hears of every drop and
   * return. `alsoOn`: other channels the process follows on the same
   * connection (an API server's token revocations).
   */
  static async open(pool: pg.Pool, health?: PartHealth, alsoOn: ChannelHandlersByName = {}): Promise<NoticeListener> {
    const notices = new NoticeListener();
    const commands: ChannelHandlers = {
      onMessage: (payload) => {
        const notice = parseNotice(payload);
        if (!notice) return;
        for (const subscriber of notices.subscribers) subscriber.deliver(notice);
        for (const watcher of notices.watchers) watcher.onNotice(notice);
      },
      onResync: () => {
        for (const subscriber of notices.subscribers) subscriber.resync();
        for (const watcher of notices.watchers) watcher.onResync();
      },
    };
    notices.listener = await ChannelListener.open(pool, { ...alsoOn, [COMMANDS_CHANNEL]: commands }, health);
    return notices;
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
    this.subscribers.clear();
    this.watchers.clear();
    await this.listener?.close();
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
