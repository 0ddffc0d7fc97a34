import { z } from 'zod';
import { InvalidInputError } from '../domain/errors.ts';
import { describeAllowedHosts, isHostAllowed, type AllowedHosts } from '../domain/allowedHosts.ts';

/** Longest callback URL accepted: enough for any real endpoint, bounded for storage. */
const MAX_URL_LENGTH = 2048;

/**
 * The `callback` member of a command request body: `{ "url": "http://..." }`.
 * Only the shape; whether the host is allowed depends on configuration and
 * is checked by `checkCallbackUrl` (which `attachCallback` always calls).
 */
export const CallbackRequestSchema = z
  .object({
    url: z.string().min(1).max(MAX_URL_LENGTH).describe('where to POST the final status; http(s), host on the allow-list'),
  })
  .strict();
export type CallbackRequest = z.infer<typeof CallbackRequestSchema>;

const SCHEMES = ['http:', 'https:'];
const FIELD = 'callback.url';

/**
 * Checks a callback URL: absolute, http or https, no credentials in it, and a
 * host on the allow-list. Returns the URL in canonical form, or throws an
 * InvalidInputError that says what would be accepted.
 */
export function checkCallbackUrl(text: string, allowed: AllowedHosts): string {
  const refuse = (problem: string) => {
    const hosts = allowed.length === 0 ? 'none: callbacks are disabled' : describeAllowedHosts(allowed);
    return new InvalidInputError(
      `${FIELD}: ${problem}; expected http(s)://<host>[:port]/<path> with a host allowed by SLIPWAY_CALLBACK_ALLOWED_HOSTS (${hosts})`,
      { field: FIELD, allowedHosts: allowed },
    );
  };
  if (text.length > MAX_URL_LENGTH) throw refuse(`longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw refuse(`"${text}" is not an absolute URL`);
  }
  if (!SCHEMES.includes(url.protocol)) throw refuse(`scheme "${url.protocol.slice(0, -1)}" is not allowed`);
  if (url.username || url.password) throw refuse('a user name or password in the URL is not allowed');
  if (!isHostAllowed(url.hostname, allowed)) throw refuse(`host "${url.hostname}" is not allowed`);
  url.hash = '';
  return url.href;
}
