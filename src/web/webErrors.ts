import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { answerFor } from '../api/errors.ts';
import { NotFoundError } from '../domain/errors.ts';
import { html } from './html.ts';
import { sendPage } from './layout.ts';

/**
 * The web UI's errors: the API's one mapping (answerFor) decides the status
 * and the message, and they are shown as a page instead of JSON, with the
 * request id to find it in the log. Never a stack.
 */
export function installWebErrors(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => sendErrorPage(request, reply, error));
  // Any other GET is a page that does not exist: a 404 page, except under the
  // API's prefix, where the API's JSON answer stays (fastify has one
  // not-found handler for `/`, and it is the API's).
  app.get('/*', async (request, reply) => {
    const path = request.url.split('?')[0]!;
    if (path.startsWith(API_PREFIX)) return reply.callNotFound();
    return sendErrorPage(request, reply, new NotFoundError('page', path));
  });
}

const API_PREFIX = '/v1/';

const TITLES: Record<number, string> = {
  400: 'That request is not valid',
  401: 'Please sign in',
  403: 'Not allowed',
  404: 'Not found',
  409: 'Not possible now',
  429: 'Too many requests',
  503: 'Try again',
};

export function sendErrorPage(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  const answer = answerFor(error, request);
  if (answer.status >= 500) request.log.error({ err: error }, 'page failed');
  else request.log.info({ code: answer.body.code, status: answer.status }, answer.body.message);
  if (answer.retryAfter !== undefined) reply.header('retry-after', String(Math.ceil(answer.retryAfter)));
  const title = TITLES[answer.status] ?? (answer.status >= 500 ? 'Something went wrong' : 'Request refused');
  return sendPage(
    request,
    reply,
    {
      title,
      main: html`<h1>${title}</h1>
<div class="error" role="alert"><p>${answer.body.message}</p>
<p class="muted">HTTP ${answer.status} · ${answer.body.code} · request ${request.id}</p></div>
<p>${answer.status === 401 ? html`<a href="/sign-in">Sign in</a> · ` : ''}<a href="/">Overview</a></p>`,
    },
    answer.status,
  );
}
