import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ApiError } from '../api/errors.ts';

/**
 * Cross-site request forgery, refused twice over:
 *
 * 1. Every form carries a token in the hidden field `_csrf`, checked here
 *    before the body is validated or anything is read for the request: the
 *    session's own token (random per session, kept in web_sessions), or,
 *    on the sign-in form, before there is a session, a random token also
 *    set as a cookie (double submit), so a page elsewhere cannot sign a
 *    browser in as someone else.
 * 2. The cookies are SameSite=Strict, so another site's page cannot make a
 *    browser send them at all.
 *
 * A POST whose Origin header names another origin is refused as well: the
 * cheapest check, and it explains itself.
 */
export const CSRF_FIELD = '_csrf';

export function assertCsrf(request: FastifyRequest, expected: string | undefined): void {
  assertSameOrigin(request);
  const given = (request.body as Record<string, unknown> | null | undefined)?.[CSRF_FIELD];
  if (typeof given !== 'string' || expected === undefined || !sameSecret(given, expected)) {
    throw new ApiError(
      'forbidden',
      'this form is stale or did not come from Slipway (its CSRF token does not match); reload the page and try again',
      {
        field: CSRF_FIELD,
      },
    );
  }
}

function assertSameOrigin(request: FastifyRequest): void {
  const origin = request.headers.origin;
  if (origin === undefined || origin === `${request.protocol}://${request.host}`) return;
  throw new ApiError('forbidden', `a form posted from ${origin} is not accepted here`, { origin });
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
