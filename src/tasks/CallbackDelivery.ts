import { sql } from 'kysely';
import type { CallbackRow } from '../../migrations/schema.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/Database.ts';
import type { Logger } from '../log.ts';
import { recordCallbackDelivery } from '../metrics/metrics.ts';
import type { AllowedHosts } from '../domain/allowedHosts.ts';
import { buildCallbackPayload } from '../api/callbackPayload.ts';
import { checkCallbackUrl } from '../callbacks/CallbackRequest.ts';
import { dispatchCallbacksQuietly } from '../callbacks/dispatchCallbacks.ts';
import { lockUnsettledTree } from '../callbacks/lockUnsettledTree.ts';
import { loadCallbackSecret } from '../callbacks/callbackSecret.ts';
import { SIGNATURE_HEADER, signCallback } from '../callbacks/signCallback.ts';
import { formatDuration } from '../domain/durations.ts';

export interface CallbackSettings {
  readonly allowedHosts: AllowedHosts;
  readonly maxAttempts: number;
  /** Wait before the second attempt; doubled for each one after, up to maxBackoffMs. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  /** How long one attempt may take, connection to last byte of the answer's head. */
  readonly timeoutMs: number;
  readonly secret: () => Promise<string>;
}

/** What one attempt came to. `final`: trying again cannot help. */
interface AttemptResult {
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly final?: boolean;
}

/** Wait after the n-th failed attempt (n from 1). */
export function callbackBackoffMs(attempt: number, settings: Pick<CallbackSettings, 'backoffMs' | 'maxBackoffMs'>): number {
  return Math.min(settings.backoffMs * 2 ** (attempt - 1), settings.maxBackoffMs);
}

/**
 * Delivers callbacks, one attempt per `deliver_callback` job: POSTs the
 * signed final status, records the attempt, and on failure queues the next
 * job after a backoff, until a 2xx answer or the last attempt.
 *
 * Delivery is at least once: a worker that dies between the POST and the
 * record of it leaves the job to be run again. Receivers tell repeats apart
 * by the Slipway-Delivery header (the callback id).
 */
export class CallbackDelivery {
  constructor(
    private readonly db: Db,
    private readonly settings: CallbackSettings,
    private readonly log: Logger,
  ) {}

  static fromConfig(db: Db, config: Config, log: Logger): CallbackDelivery {
    return new CallbackDelivery(
      db,
      {
        allowedHosts: config.SLIPWAY_CALLBACK_ALLOWED_HOSTS,
        maxAttempts: config.SLIPWAY_CALLBACK_MAX_ATTEMPTS,
        backoffMs: config.SLIPWAY_CALLBACK_BACKOFF_MS,
        maxBackoffMs: config.SLIPWAY_CALLBACK_MAX_BACKOFF_MS,
        timeoutMs: config.SLIPWAY_CALLBACK_TIMEOUT_MS,
        // Read on the first delivery, not at start: most workers never send one.
        secret: retryingOnce(() => loadCallbackSecret(config)),
      },
      log.child({ component: 'callbacks' }),
    );
  }

  async deliver(callbackId: number): Promise<void> {
    const callback = await this.db
      .selectFrom('command_callbacks')
      .selectAll()
      .where('id', '=', callbackId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    // Delivered, given up, or gone with its command: a stale job.
    if (!callback) return;
    if (await this.waitAgainIfUnsettled(callback)) return;
    const attempt = callback.attempts + 1;
    const startedAt = new Date();
    const result = await this.post(callback, attempt);
    await this.record(callback, attempt, startedAt, result);
  }

  /**
   * The trigger that queued this delivery judged the tree settled. That
   * judgement is checked again here, under the same lock protocol as
   * attachCallback: a callback must carry the tree's final state, and the
   * full suite once caught one sent with a command of its tree still queued
   * (cause not yet found). If the tree has unsettled commands, they stay
   * share-locked until the callback is back to `waiting`, so the settlement
   * of the last of them sees it and queues the delivery again.
   */
  private async waitAgainIfUnsettled(callback: CallbackRow): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      if (!(await lockUnsettledTree(trx, callback.command_id))) return false;
      await trx
        .updateTable('command_callbacks')
        .set({ status: 'waiting', next_attempt_at: null })
        .where('id', '=', callback.id)
        .where('status', '=', 'pending')
        .execute();
      this.log.warn({ callback: callback.id, command: callback.command_id }, 'callback queued before its tree settled; waiting again');
      return true;
    });
  }

  private async post(callback: CallbackRow, attempt: number): Promise<AttemptResult> {
    try {
      // Checked again: the allow-list may have shrunk since the callback was registered.
      checkCallbackUrl(callback.url, this.settings.allowedHosts);
    } catch (error) {
      return { statusCode: null, error: `not sent: ${(error as Error).message}`, final: true };
    }
    const body = JSON.stringify(await buildCallbackPayload(this.db, callback.id, callback.command_id));
    let response: Response;
    try {
      response = await fetch(callback.url, {
        method: 'POST',
        // A redirect could point anywhere, past the allow-list: never followed.
        redirect: 'manual',
        signal: AbortSignal.timeout(this.settings.timeoutMs),
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Slipway-Callback/1',
          [SIGNATURE_HEADER]: signCallback(body, await this.settings.secret()),
          'Slipway-Delivery': String(callback.id),
          'Slipway-Attempt': String(attempt),
        },
        body,
      });
    } catch (error) {
      return { statusCode: null, error: this.describeFailure(error) };
    }
    // The answer's body is not used; dropping it frees the connection.
    await response.body?.cancel().catch(() => undefined);
    const { status } = response;
    if (status >= 200 && status < 300) return { statusCode: status, error: null };
    if (status >= 300 && status < 400) {
      return { statusCode: status, error: `redirect to ${response.headers.get('location') ?? '(no location)'} not followed` };
    }
    return { statusCode: status, error: `receiver answered ${status}${response.statusText ? ` ${response.statusText}` : ''}` };
  }

  private describeFailure(error: unknown): string {
    if (error instanceof DOMException && error.name === 'TimeoutError') {
      return `no answer within ${formatDuration(this.settings.timeoutMs)}`;
    }
    // fetch wraps the network error ("fetch failed"); its cause says what happened.
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? (error as Error).message;
  }

  /** The attempt and the callback's new status (due again, if another try is): one transaction. */
  private async record(callback: CallbackRow, attempt: number, startedAt: Date, result: AttemptResult): Promise<void> {
    const delivered = result.error === null;
    const gaveUp = !delivered && (result.final === true || attempt >= this.settings.maxAttempts);
    const nextRetryAt = delivered || gaveUp ? null : new Date(Date.now() + callbackBackoffMs(attempt, this.settings));
    await this.db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('command_callbacks')
        .set({
          attempts: attempt,
          status: delivered ? 'delivered' : gaveUp ? 'failed' : 'pending',
          next_attempt_at: nextRetryAt,
          finished_at: nextRetryAt ? null : sql<Date>`now()`,
        })
        .where('id', '=', callback.id)
        .where('attempts', '=', callback.attempts)
        .executeTakeFirst();
      // Another run recorded this attempt first (a job repeated after a crash).
      if (updated.numUpdatedRows !== 1n) return;
      await trx
        .insertInto('callback_attempts')
        .values({
          callback_id: callback.id,
          attempt,
          started_at: startedAt,
          status_code: result.statusCode,
          error: result.error,
          next_retry_at: nextRetryAt,
        })
        .execute();
      if (nextRetryAt) await sql`select queue_callback_delivery(${callback.id}, ${nextRetryAt})`.execute(trx);
    });
    // The retry's job, queued after the commit (see dispatchCallbacks.ts).
    if (nextRetryAt) await dispatchCallbacksQuietly(this.db);
    recordCallbackDelivery(delivered ? 'delivered' : gaveUp ? 'failed' : 'retry');
    const log = { callback: callback.id, command: callback.command_id, attempt, status: result.statusCode };
    if (delivered) this.log.debug(log, 'callback delivered');
    else if (gaveUp) this.log.warn({ ...log, error: result.error }, 'callback failed; giving up');
    else this.log.info({ ...log, error: result.error, nextRetryAt }, 'callback failed; will retry');
  }
}

/** Memoises an async load, but forgets a failure so the next call tries again. */
function retryingOnce<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= load().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}
