import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authorize } from '../api/auth/authenticate.ts';
import type { Action } from '../api/auth/roles.ts';
import { ApiError } from '../api/errors.ts';
import type { Db } from '../db/Database.ts';
import { readCookie, SESSION_COOKIE } from './cookies.ts';
import { assertCsrf } from './csrf.ts';
import { findSession, type WebSession } from './sessions.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What a web page or form needs its signed-in user's role to allow; a web route without one is public. */
    webAction?: Action;
  }
  interface FastifyRequest {
    /** The signed-in browser's session, with its id (the cookie's value). */
    session?: WebSession & { readonly id: string };
  }
}

/**
 * The web UI's gate, the counterpart of the API's bearer authentication: a
 * page needs a live session (a browser without one is sent to sign in), the
 * session's token must be allowed the route's action by the same GRANTS
 * table the API uses, and a POST must carry the session's CSRF token. All
 * of it happens before the handler runs, so a refused request writes
 * nothing. The caller it sets records `web` as the source of its commands.
 */
export function installWebAuthentication(app: FastifyInstance, db: Db): void {
  app.addHook('onRequest', async (request, reply) => {
    const action = request.routeOptions.config.webAction;
    // Public routes (sign-in, assets) need no session, so they cost no lookup.
    if (action === undefined) return;
    const id = readCookie(request, SESSION_COOKIE);
    const session = id === undefined ? undefined : await findSession(db, id);
    if (!session) return refuseSignedOut(request, reply);
    request.session = { ...session, id: id! };
    request.caller = authorize(session.token, action, 'web');
  });
  app.addHook('preValidation', async (request) => {
    if (request.method === 'POST' && request.routeOptions.config.webAction !== undefined) assertCsrf(request, request.session?.csrfToken);
  });
}

/** A page sends the browser to sign in and come back; anything else (a form, the event stream) is a 401. */
function refuseSignedOut(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (request.method === 'GET' && request.headers.accept !== 'text/event-stream') {
    return reply.redirect(`/sign-in?next=${encodeURIComponent(request.url)}`, 303);
  }
  throw new ApiError('unauthorized', 'you are not signed in (or your session ended); sign in again');
}
