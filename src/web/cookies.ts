import type { FastifyReply, FastifyRequest } from 'fastify';

/** The web UI's cookies: the session, and the sign-in form's CSRF token (before there is a session). */
export const SESSION_COOKIE = 'slipway_session';
export const SIGN_IN_COOKIE = 'slipway_sign_in';

/** The cookie's value; undefined when it is absent or not valid percent-encoding (no cookie we set is: it is treated as none). */
export function readCookie(request: FastifyRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return decoded(part.slice(at + 1).trim());
  }
  return undefined;
}

function decoded(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

/**
 * Sets a cookie the way every web UI cookie is set: HttpOnly (no script
 * reads it), SameSite=Strict (no other site's page sends it, not even on a
 * link), Path=/, and Secure when the request came over https (directly or,
 * with fastify's trustProxy, through a proxy saying so).
 */
export function setCookie(request: FastifyRequest, reply: FastifyReply, name: string, value: string, maxAgeS: number): void {
  const attributes = [`${name}=${encodeURIComponent(value)}`, 'Path=/', 'HttpOnly', 'SameSite=Strict', `Max-Age=${maxAgeS}`];
  if (request.protocol === 'https') attributes.push('Secure');
  const previous = reply.getHeader('set-cookie');
  const cookies = previous === undefined ? [] : Array.isArray(previous) ? previous : [String(previous)];
  reply.header('set-cookie', [...cookies, attributes.join('; ')]);
}

export function clearCookie(request: FastifyRequest, reply: FastifyReply, name: string): void {
  setCookie(request, reply, name, '', 0);
}
