import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { FailureLimiter } from '../../api/auth/FailureLimiter.ts';
import { findLiveToken } from '../../api/auth/tokens.ts';
import { ApiError } from '../../api/errors.ts';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { ApiContext } from '../../api/ApiContext.ts';
import { clearCookie, readCookie, SESSION_COOKIE, setCookie, SIGN_IN_COOKIE } from '../cookies.ts';
import { assertCsrf, CSRF_FIELD } from '../csrf.ts';
import { blank } from '../forms.ts';
import { html } from '../html.ts';
import { sendPage } from '../layout.ts';
import { closeSession, openSession, randomSecret, SESSION_HOURS } from '../sessions.ts';
import { formatDuration } from '../../domain/durations.ts';

/** Where to go after signing in: a path on this server only (never `//elsewhere`), else the overview. */
const NextPath = blank(
  z
    .string()
    .max(2000)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what a path here must not hold
    .regex(/^\/(?![/\\])[^\x00-\x1f]*$/, 'expected a path on this server')
    .optional(),
);

const SIGN_IN_FORM_S = 3600;

/**
 * Sign-in with an API token (the same tokens as the API: `slipway token
 * create`, or the admin token the first start writes), giving a session;
 * sign-out ends it. The sign-in form is guarded by a double-submit token
 * (csrf.ts), and failures are rate-limited per address like the API's.
 */
export async function signInPages(app: FastifyInstance, context: ApiContext): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  const { db } = context.database;
  const limiter = new FailureLimiter(context.config.SLIPWAY_API_AUTH_FAILURES_PER_MINUTE);
  const pruning = setInterval(() => limiter.prune(), 60_000);
  pruning.unref();
  app.addHook('onClose', async () => clearInterval(pruning));

  const form = (formToken: string, next: string | undefined, problem?: string) => html`<section class="card sign-in">
<h1>Sign in to Slipway</h1>
${problem ? html`<p class="error" role="alert">${problem}</p>` : ''}
<form method="post" action="/sign-in">
  <input type="hidden" name="${CSRF_FIELD}" value="${formToken}">
  ${next ? html`<input type="hidden" name="next" value="${next}">` : ''}
  <label for="token">API token</label>
  <input id="token" name="token" type="password" autocomplete="current-password" required placeholder="slw_…" autofocus>
  <button type="submit">Sign in</button>
</form>
<p class="muted">Use a token from <code>slipway token create --name you --role operator</code>, or, on a fresh
embedded install, the admin token <code>slipway start</code> wrote to <code>.slipway/admin-token</code>.
Your role decides which buttons you get.</p>
</section>`;

  /** A sign-in page with a fresh form token, set as a cookie too. */
  const sendForm = (
    request: Parameters<typeof sendPage>[0],
    reply: Parameters<typeof sendPage>[1],
    next?: string,
    problem?: string,
    status = 200,
  ) => {
    const formToken = randomSecret();
    setCookie(request, reply, SIGN_IN_COOKIE, formToken, SIGN_IN_FORM_S);
    return sendPage(request, reply, { title: 'Sign in', main: form(formToken, next, problem) }, status);
  };

  typed.route({
    method: 'GET',
    url: '/sign-in',
    schema: { querystring: z.object({ next: NextPath }).strict() },
    handler: async (request, reply) => sendForm(request, reply, request.query.next),
  });

  typed.route({
    method: 'POST',
    url: '/sign-in',
    schema: { body: z.object({ [CSRF_FIELD]: z.string(), token: z.string().max(300), next: NextPath }).strict() },
    handler: async (request, reply) => {
      const { body } = request;
      assertCsrf(request, readCookie(request, SIGN_IN_COOKIE));
      const wait = limiter.retryAfter(request.ip);
      if (wait > 0)
        throw new ApiError('too_many_requests', `too many failed sign-ins from ${request.ip}; try again in ${formatDuration(wait * 1000)}`, {}, wait);
      const token = await findLiveToken(db, body.token.trim());
      if (!token) {
        limiter.recordFailure(request.ip);
        return sendForm(request, reply, body.next, 'That token is unknown or revoked.', 401);
      }
      const id = await openSession(db, token);
      clearCookie(request, reply, SIGN_IN_COOKIE);
      setCookie(request, reply, SESSION_COOKIE, id, SESSION_HOURS * 3600);
      return reply.redirect(body.next ?? '/', 303);
    },
  });

  typed.route({
    method: 'POST',
    url: '/sign-out',
    config: { webAction: 'read' },
    schema: { body: z.object({ [CSRF_FIELD]: z.string() }).strict() },
    handler: async (request, reply) => {
      await closeSession(db, request.session!.id);
      clearCookie(request, reply, SESSION_COOKIE);
      return reply.redirect('/sign-in', 303);
    },
  });
}
