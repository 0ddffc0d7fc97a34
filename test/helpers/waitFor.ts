import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls until `check` returns a value other than undefined/false, or fails
 * with `what` after `timeoutMs`. Timeouts here are generous bounds for
 * "eventually", never speed assertions.
 */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await sleep(50);
  }
}
