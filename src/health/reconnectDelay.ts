import { setTimeout as sleep } from 'node:timers/promises';

/** The first retry comes after this long, then twice as long each time, up to RECONNECT_MAX_MS. */
const RECONNECT_FIRST_MS = 250;
/**
 * Short enough that a part is back within a few seconds of the database
 * answering again (the restart tests expect 5 s), long enough that a part
 * retrying against a database that is down costs nothing to speak of.
 */
export const RECONNECT_MAX_MS = 2000;

/**
 * Waits before reconnect attempt `attempt` (0 for the first), with jitter so
 * that many processes do not all come back in the same instant. Resolves
 * false at once if `signal` aborts (the process is stopping).
 */
export async function waitBeforeReconnect(attempt: number, signal: AbortSignal): Promise<boolean> {
  const ms = Math.min(RECONNECT_MAX_MS, RECONNECT_FIRST_MS * 2 ** attempt) * (0.75 + Math.random() / 2);
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}
