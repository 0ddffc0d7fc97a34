/**
 * Counts failed authentications per client address in a sliding window of
 * one minute, in this process's memory. Over the limit, an address is told
 * to come back later (429) before its token is even looked at, so guessing
 * tokens costs a minute per `limit` guesses (and the 256-bit secrets make
 * guessing hopeless anyway: this mostly keeps noise off the database).
 * Per process on purpose: no shared state to keep, and N servers allow at
 * most N times the limit.
 */
const WINDOW_MS = 60_000;

export class FailureLimiter {
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly limit: number) {}

  /** Seconds until `address` may try again, or 0 when it may now. */
  retryAfter(address: string, now = Date.now()): number {
    const recent = this.recent(address, now);
    if (recent.length < this.limit) return 0;
    return Math.ceil((recent[recent.length - this.limit]! + WINDOW_MS - now) / 1000);
  }

  recordFailure(address: string, now = Date.now()): void {
    const recent = this.recent(address, now);
    recent.push(now);
    this.failures.set(address, recent);
  }

  /** Forgets addresses with no failure in the window (called on a timer). */
  prune(now = Date.now()): void {
    for (const address of this.failures.keys()) {
      if (this.recent(address, now).length === 0) this.failures.delete(address);
    }
  }

  private recent(address: string, now: number): number[] {
    const kept = (this.failures.get(address) ?? []).filter((at) => at > now - WINDOW_MS);
    if (kept.length > 0) this.failures.set(address, kept);
    else this.failures.delete(address);
    return kept;
  }
}
