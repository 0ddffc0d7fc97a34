import fastifyCookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** The web UI's cookies: the session, and the sign-in form's CSRF token (before there is a session). */
export const SESSION_COOKIE = 'slipway_session';
export const SIGN_IN_COOKIE = 'slipway_sign_in';

/**
 * Parses the Cookie header of the web UI's requests (@fastify/cookie). A
 * malformed header or value is no error: a cookie that cannot be read is
 * treated as absent, so the request is answered as one without a session.
 */
export async function installCookies(app: FastifyInstance): Promise<void> {
  await app.register(fastifyCookie);
}

/** The cookie's value, or undefined when the request has none by that name. */
export function readCookie(request: FastifyRequest, name: string): string | undefined {
  return request.cookies[name];
}

/**
 * Sets a cookie the way every web UI cookie is set: HttpOnly (no script
 * reads it), SameSite=Strict (no other site's page sends it, not even on a
 * link), Path=/, and Secure when the request came over https (directly or,
 * with fastify's trustProxy, through a proxy saying so).
 */
export function setCookie(request: FastifyRequest, reply: FastifyReply, name: string, value: string, maxAgeS: number): void {
  reply.setCookie(name, value, { path: '/', httpOnly: true, sameSite: 'strict', maxAge: maxAgeS, secure: request.protocol === 'https' });
}

export function clearCookie(request: FastifyRequest, reply: FastifyReply, name: string): void {
  setCookie(request, reply, name, '', 0);
}
