import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LeaseDetail } from '../api/contract.ts';
import type { Lease, LineStandingShape, Resource, TimelineEntryShape } from '../api/shapes.ts';
import { DEFAULT_HEARTBEAT_MS } from '../domain/holding.ts';
import { isSettingUp, READY_STATE } from '../domain/lifecycle.ts';
import { LeaseEnding, LeaseLost, LeaseNotGranted, LeaseUnreachable, type LeaseEnd } from './leaseErrors.ts';

type TimelineEvent = Extract<TimelineEntryShape, { type: 'event' }>;

const settingUp = (state: string) => isSettingUp('lease', state);

/**
 * THE semantics of holding a lease for exactly as long as some work runs,
 * which `client.withLease` and `slipway lease run` (local and remote alike)
 * share: request a heartbeat lease, wait until it is active, run the work,
 * beat the heartbeat and watch the lease while it runs, abort the work's
 * signal when the lease ends from outside or Slipway says it will end it
 * (its `ending`), and release the lease when the work ends, however it ends.
 *
 * It talks to Slipway through a LeaseService: the HTTP API (ApiLeaseService)
 * or, for the CLI without SLIPWAY_URL, the database itself.
 */

/** What holding a lease needs of Slipway. */
export interface LeaseService<Request> {
  /**
   * Requests the lease and waits up to `waitSeconds` for it to be set up.
   * Sending the same request again with the same idempotency key must answer
   * with the same lease (a retry after a failure that may have committed).
   */
  request(request: Request, options: { readonly waitSeconds: number; readonly idempotencyKey: string }): Promise<Lease>;
  read(id: number): Promise<LeaseDetail>;
  readResource(id: number): Promise<Resource>;
  /** Appends a command to the lease, as the caller. */
  ask(id: number, command: LeaseAsk): Promise<void>;
  /** True for a failure that may pass by itself (Slipway restarting, a network blip, 503): tried again, within the lease's patience. */
  isTransient(error: unknown): boolean;
  /** True for a refusal that means the lease is no longer the caller's to release (it has ended already). */
  isGone(error: unknown): boolean;
}

/** The commands a holder sends its lease. */
export type LeaseAsk =
  | { readonly kind: 'renew'; readonly payload: { readonly heartbeatOnly?: true }; readonly reason: string }
  | { readonly kind: 'release'; readonly payload?: undefined; readonly reason: string };

/** What the work gets: the lease, active, and the resource whose slot it holds. */
export interface HeldLease {
  readonly lease: Lease;
  readonly resource: Resource;
}

/** What happens while a lease is requested, waited for, held and given back: for progress lines or logs. */
export type HoldEvent =
  | { readonly type: 'requested'; readonly lease: Lease }
  /** Told whenever its place in line or its message reads differently. */
  | { readonly type: 'waiting'; readonly lease: Lease; readonly line: LineStandingShape | null }
  | { readonly type: 'active'; readonly held: HeldLease }
  /** Slipway could not be reached (or answered 503): tried again until `giveUpAt`. */
  | { readonly type: 'retrying'; readonly error: Error; readonly giveUpAt: Date }
  | { readonly type: 'reconnected' }
  | { readonly type: 'released'; readonly lease: Lease; readonly reason: string }
  /** The release could not be sent: the lease's heartbeat deadline frees it. */
  | { readonly type: 'release_failed'; readonly lease: Lease; readonly error: Error };

/** How the work ended, for the release's reason. */
export type WorkOutcome<T> = { readonly value: T } | { readonly error: unknown };

export interface HoldOptions<T> {
  /**
   * Stops it: while waiting, the lease is released and the call rejects
   * with LeaseNotGranted (`stopped`); while the work runs, the work's signal
   * aborts with this signal's reason and the lease is released once it ends.
   */
  readonly signal?: AbortSignal;
  readonly onEvent?: (event: HoldEvent) => void;
  /** The reason recorded on the release (default: whether the work ended or failed). */
  readonly releaseReason?: (outcome: WorkOutcome<T>) => string;
}

/** How often a lease is read while it waits and while it is held: an operator's release reaches the work within about this. */
export const WATCH_MS = 1000;
/**
 * The request's own wait: a free slot's grant fits in it, so a lease granted
 * at once needs no read after it, and a lease that waits in line says where
 * it stands after no longer than this.
 */
const FIRST_WAIT_S = 1;
/** How long a release is tried before it is left to the heartbeat deadline. */
const RELEASE_PATIENCE_MS = 10_000;

export async function holdLease<Request extends { readonly heartbeatMs?: number }, T>(
  service: LeaseService<Request>,
  request: Request,
  work: (held: HeldLease, signal: AbortSignal) => Promise<T>,
  options: HoldOptions<T> = {},
): Promise<T> {
  const heartbeatMs = request.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  const holder = new Holder(service, heartbeatMs, options);
  const held = await holder.acquire({ ...request, heartbeatMs });
  return holder.run(held, work);
}

class Holder<Request, T> {
  /** Transient failures are tried again for as long as the heartbeat deadline allows: two intervals. */
  private readonly patienceMs: number;

  constructor(
    private readonly service: LeaseService<Request>,
    private readonly heartbeatMs: number,
    private readonly options: HoldOptions<T>,
  ) {
    this.patienceMs = 2 * heartbeatMs;
  }

  /** Requests the lease and waits until it is active; a lease that will not be, or a stop, is released and rejects. */
  async acquire(request: Request): Promise<HeldLease> {
    const idempotencyKey = randomUUID();
    // A stop while the request is on its way waits for its answer: the lease it made must be released, not left behind.
    let lease = await this.patiently(() => this.service.request(request, { waitSeconds: FIRST_WAIT_S, idempotencyKey })).catch((error) => {
      throw error instanceof LeaseUnreachable ? error : LeaseNotGranted.refused(error as Error);
    });
    this.emit({ type: 'requested', lease });
    try {
      let shown: string | undefined;
      for (;;) {
        const detail = await this.patiently(() => this.service.read(lease.id));
        lease = detail.lease;
        if (!settingUp(lease.state)) {
          if (lease.state !== READY_STATE.lease) throw LeaseNotGranted.ended(lease, endOf(detail, settingUp));
          break;
        }
        const looks = JSON.stringify([detail.line, lease.message]);
        if (looks !== shown) this.emit({ type: 'waiting', lease, line: detail.line });
        shown = looks;
        await this.pause(WATCH_MS);
      }
      this.throwIfStopped();
      return { lease, resource: await this.patiently(() => this.service.readResource(lease.resourceId!)) };
    } catch (error) {
      await this.release(lease, error instanceof LeaseNotGranted && error.why === 'stopped' ? 'stopped waiting' : 'not granted');
      throw error;
    }
  }

  /** Runs the work while the lease is watched and beaten; releases it when the work ends. */
  async run(held: HeldLease, work: (held: HeldLease, signal: AbortSignal) => Promise<T>): Promise<T> {
    const { lease } = held;
    this.emit({ type: 'active', held });
    const holding = new AbortController();
    const stopWatching = new AbortController();
    const stop = () => holding.abort(this.options.signal?.reason);
    this.options.signal?.addEventListener('abort', stop, { once: true });
    const watching = this.watch(lease, holding, stopWatching.signal);
    let outcome: WorkOutcome<T>;
    try {
      outcome = { value: await work(held, holding.signal) };
    } catch (error) {
      outcome = { error };
    } finally {
      this.options.signal?.removeEventListener('abort', stop);
      stopWatching.abort();
      await watching;
    }
    const ended: unknown = holding.signal.reason;
    if (!(ended instanceof LeaseLost)) {
      await this.release(lease, this.options.releaseReason?.(outcome) ?? ('error' in outcome ? 'the work failed' : 'the work is done'));
    }
    // The work ran without its lease from then on, or was stopped for its end: that, rather than what the work made of it, is the answer.
    if (ended instanceof LeaseLost || ended instanceof LeaseUnreachable || ended instanceof LeaseEnding) throw ended;
    if ('error' in outcome) throw outcome.error;
    return outcome.value;
  }

  /**
   * Reads the lease every WATCH_MS and renews its heartbeat twice an interval,
   * until stopped. Aborts `holding` with LeaseLost when the lease ends from
   * outside, with LeaseEnding when Slipway says it will end it (the work
   * then has until `ending.at` to stop, and the lease is watched on), and with LeaseUnreachable when Slipway cannot be reached for
   * longer than the heartbeat deadline allows (the lease is gone by then):
   * the patience runs from the last answer, not from each look.
   */
  private async watch(lease: Lease, holding: AbortController, stopped: AbortSignal): Promise<void> {
    let lastContact = Date.now();
    let lastBeat = Date.now();
    const look = async () => {
      // Twice an interval: a beat that is late or lost still leaves one before the deadline (two intervals).
      if (Date.now() - lastBeat >= this.heartbeatMs / 2) {
        await this.service.ask(lease.id, { kind: 'renew', payload: beatOf(lease), reason: 'heartbeat' }).catch((error: unknown) => {
          // A lease that ended refuses its renewal; the read below says how it ended.
          if (!this.service.isGone(error)) throw error;
        });
        lastBeat = Date.now();
      }
      return this.service.read(lease.id);
    };
    for (;;) {
      await sleep(WATCH_MS, undefined, { signal: stopped }).catch(() => undefined);
      if (stopped.aborted) return;
      let detail: LeaseDetail;
      try {
        detail = await this.patiently(look, lastContact + this.patienceMs, stopped);
      } catch (error) {
        if (!stopped.aborted)
          holding.abort(new LeaseUnreachable(lease, error instanceof LeaseUnreachable ? (error.cause as Error) : (error as Error)));
        return;
      }
      lastContact = Date.now();
      const { ending } = detail.lease;
      if (ending && !holding.signal.aborted) holding.abort(new LeaseEnding(detail.lease, ending));
      if (detail.lease.state !== READY_STATE.lease) {
        holding.abort(
          new LeaseLost(
            detail.lease,
            endOf(detail, (state) => state === READY_STATE.lease),
          ),
        );
        return;
      }
    }
  }

  /** Gives the lease up (a lease already ended is left as it is); a release that cannot be sent is left to the heartbeat deadline. */
  private async release(lease: Lease, reason: string): Promise<void> {
    try {
      await this.patiently(() => this.service.ask(lease.id, { kind: 'release', reason }), Date.now() + RELEASE_PATIENCE_MS);
      this.emit({ type: 'released', lease, reason });
    } catch (error) {
      if (this.service.isGone(error)) return;
      this.emit({ type: 'release_failed', lease, error: error as Error });
    }
  }

  /**
   * Calls `attempt` until it succeeds, trying a transient failure again
   * every WATCH_MS until `giveUpAt` (then LeaseUnreachable); `stop` ends the
   * tries early, with its abort.
   */
  private async patiently<R>(attempt: () => Promise<R>, giveUpAt = Date.now() + this.patienceMs, stop?: AbortSignal): Promise<R> {
    let failing = false;
    for (;;) {
      try {
        const result = await attempt();
        if (failing) this.emit({ type: 'reconnected' });
        return result;
      } catch (error) {
        if (!this.service.isTransient(error)) throw error;
        if (Date.now() >= giveUpAt) throw new LeaseUnreachable(undefined, error as Error);
        if (!failing) this.emit({ type: 'retrying', error: error as Error, giveUpAt: new Date(giveUpAt) });
        failing = true;
        await sleep(WATCH_MS, undefined, { signal: stop });
      }
    }
  }

  private throwIfStopped(): void {
    const { signal } = this.options;
    if (signal?.aborted) throw LeaseNotGranted.stopped(signal.reason);
  }

  /** Waits `ms`, or rejects with LeaseNotGranted (`stopped`) when the caller stops. */
  private async pause(ms: number): Promise<void> {
    this.throwIfStopped();
    const { signal } = this.options;
    try {
      await sleep(ms, undefined, { signal });
    } catch {
      throw LeaseNotGranted.stopped(signal?.reason);
    }
  }

  private emit(event: HoldEvent): void {
    this.options.onEvent?.(event);
  }
}

/**
 * A renewal that beats the heartbeat and leaves the expiry where the
 * requester set it. A lease without an expiry needs no more than a plain
 * renewal, which every worker runs (a beat alone is renew v3, which a worker
 * from before it refuses during a rolling upgrade).
 */
function beatOf(lease: Lease): { heartbeatOnly?: true } {
  return lease.expiresAt === null ? {} : { heartbeatOnly: true };
}

/**
 * Who ended the lease and why, from the timeline read with it: the event
 * that took it out of the states it was in (`left`), not one that only
 * finished it off (released → destroyed).
 */
function endOf({ lease, timeline }: LeaseDetail, left: (state: string) => boolean): LeaseEnd {
  const end = timeline.entries
    .slice()
    .reverse()
    .find((entry): entry is TimelineEvent => entry.type === 'event' && entry.fromState !== null && left(entry.fromState));
  if (!end) return { by: null, to: lease.state, text: `it is ${lease.state}${lease.message ? `: ${lease.message}` : ''}` };
  const why = `${end.reason ? `: ${end.reason}` : ''}${end.message ? ` (${end.message})` : ''}`;
  return { by: end.who, to: end.toState ?? lease.state, text: `${end.toState} by ${end.who} (${end.where})${why}` };
}
