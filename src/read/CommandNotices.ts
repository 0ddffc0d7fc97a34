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
 * LISTENs on the drain's channel on a dedicated connection (LISTEN belongs to
 * a session, so it cannot share pooled connections) and lets a waiter sleep
 * until a notice it cares about arrives.
 *
 * Notices are kept from one `clear()` to the next rather than handed out
 * once: a waiter clears, reads the state, then asks whether anything relevant
 * to what it just read arrived meanwhile. A notice that landed during the read
 * (say, for a command the read revealed) is thus never lost.
 */
export class CommandNotices {
  private received: CommandNotice[] = [];
  private arrived: (() => void) | undefined;

  private constructor(private readonly client: pg.PoolClient) {
    client.on('notification', (message) => {
      if (message.channel !== COMMANDS_CHANNEL) return;
      const notice = parseNotice(message.payload);
      if (!notice) return;
      this.received.push(notice);
      this.arrived?.();
    });
  }

  static async listen(pool: pg.Pool): Promise<CommandNotices> {
    const client = await pool.connect();
    try {
      await client.query(`listen ${COMMANDS_CHANNEL}`);
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    return new CommandNotices(client);
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
