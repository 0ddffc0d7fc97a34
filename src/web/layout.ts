import type { FastifyReply, FastifyRequest } from 'fastify';
import { CSRF_FIELD } from './csrf.ts';
import { html, type Renderable, type SafeHtml } from './html.ts';

/** The navigation bar, as data. */
const NAV = [
  { href: '/', label: 'Overview' },
  { href: '/blueprints', label: 'Blueprints' },
  { href: '/resources', label: 'Resources' },
  { href: '/leases', label: 'Leases' },
  { href: '/commands', label: 'Commands' },
  { href: '/teams', label: 'Teams' },
] as const;

export interface PageContent {
  readonly title: string;
  /**
   * What the page shows, for live updates: "<kind>:<id>" of each object or
   * command whose change should refresh it, or "*" for any change (lists and
   * the overview, which the browser then refreshes at a slower pace).
   */
  readonly watch?: readonly string[];
  readonly main: Renderable;
}

/**
 * Headers every web page gets: a Content-Security-Policy allowing only the
 * app's own script and stylesheet (so even markup that slipped past escaping
 * could run nothing), no framing, no sniffing.
 */
const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

export function sendPage(request: FastifyRequest, reply: FastifyReply, content: PageContent, status = 200): FastifyReply {
  return reply.code(status).headers(PAGE_HEADERS).send(renderPage(request, content).text);
}

export function renderPage(request: FastifyRequest, { title, watch = [], main }: PageContent): SafeHtml {
  const session = request.session;
  const path = request.url.split('?')[0];
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Slipway</title>
<link rel="stylesheet" href="/assets/app.css">
<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">
<script src="/assets/app.js" defer></script>
</head>
<body data-watch="${watch.join(' ')}">
<header class="top">
  <a class="brand" href="/">Slipway</a>
  ${
    session
      ? html`<nav aria-label="main">${NAV.map(
          ({ href, label }) => html`<a href="${href}"${href === path ? html` aria-current="page"` : ''}>${label}</a>`,
        )}</nav>
      <form class="who" method="post" action="/sign-out">
        <span>${session.token.name} <span class="muted">(${session.token.role})</span></span>
        ${csrfField(request)}
        <button type="submit" class="link">Sign out</button>
      </form>`
      : ''
  }
</header>
<main id="main">
${main}
</main>
<p class="live-status muted" id="live-status" aria-live="polite"></p>
</body>
</html>`;
}

/** The hidden field every form of a signed-in page carries. */
export function csrfField(request: FastifyRequest): SafeHtml {
  return html`<input type="hidden" name="${CSRF_FIELD}" value="${request.session?.csrfToken ?? ''}">`;
}
