import type { ChannelHandlers } from '../../db/ChannelListener.ts';
import type { Db } from '../../db/Database.ts';
import { findLiveToken, markUsed, type LiveToken } from './tokens.ts';

/**
 * How long a token found valid is trusted without asking the database
 * again. Spares a round trip on nearly every request. A revocation is
 * heard at once (`revocations`); this bounds how long one is missed while
 * the server cannot hear them (its LISTEN connection is being made again,
 * or the revoking process died before it announced it).
 */
const TRUST_MS = 5000;

/** How often a token's last_used_at is written, at most. */
const MARK_USED_EVERY_MS = 60_000;

/** Looks tokens up by secret, remembering valid ones for a few seconds, and keeps their last use roughly current. */
export class TrustedTokens {
  private readonly trusted = new Map<string, { token: LiveToken; until: number }>();
  private readonly lastMarked = new Map<number, number>();
  /** Revocations heard so far: a look-up that overlapped one does not trust what it read. */
  private heard = 0;

  constructor(private readonly db: Db) {}

  /** What the server's listener tells it (tokenRevocations.ts): a revoked token's id, or that some may have been missed. */
  readonly revocations: ChannelHandlers = {
    onMessage: (payload) => {
      this.heard++;
      const id = Number(payload);
      for (const [secret, { token }] of this.trusted) if (token.id === id) this.trusted.delete(secret);
    },
    onResync: () => {
      this.heard++;
      this.trusted.clear();
    },
  };

  async find(secret: string, now = Date.now()): Promise<LiveToken | undefined> {
    const known = this.trusted.get(secret);
    if (known && known.until > now) return known.token;
    this.trusted.delete(secret);
    const heard = this.heard;
    const token = await findLiveToken(this.db, secret);
    // A revocation heard while this read was under way may postdate its snapshot.
    if (token && heard === this.heard) this.trusted.set(secret, { token, until: now + TRUST_MS });
    return token;
  }

  async markUsed(token: LiveToken, now = Date.now()): Promise<void> {
    if ((this.lastMarked.get(token.id) ?? 0) >= now - MARK_USED_EVERY_MS) return;
    this.lastMarked.set(token.id, now);
    await markUsed(this.db, token.id);
  }

  /** Forgets tokens no longer trusted (called on a timer). */
  prune(now = Date.now()): void {
    for (const [secret, { until }] of this.trusted) if (until <= now) this.trusted.delete(secret);
  }
}
