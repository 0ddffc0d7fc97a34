import { TOKEN_REVOKED_CHANNEL } from '../../db/channels.ts';
import type { Db } from '../../db/Database.ts';
import { notifyAsynchronously } from '../../db/asynchronousCommit.ts';

/**
 * Announces a revocation, after the revoking commit and outside it (a
 * durable transaction of ours never sends a NOTIFY). A signal lost with its
 * process still takes effect within the cache's bound.
 */
export async function announceRevocation(db: Db, tokenId: number): Promise<void> {
  await notifyAsynchronously(db, TOKEN_REVOKED_CHANNEL, String(tokenId)).catch(() => undefined);
}
