/**
 * A browser stand-in for tests without a browser: plain fetch, its own
 * cookies, no redirects followed (so tests see each 303), and the CSRF
 * token read from the last page like a form would carry it.
 */
export interface WebAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

export class WebClient {
  private readonly cookies = new Map<string, string>();
  /** The session's CSRF token, once a signed-in page was read. */
  csrf: string | undefined;

  constructor(readonly baseUrl: string) {}

  async get(path: string, headers: Record<string, string> = {}): Promise<WebAnswer> {
    return this.request('GET', path, undefined, headers);
  }

  /** Posts a form; `_csrf` is the session's unless the fields say otherwise. */
  async post(path: string, fields: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<WebAnswer> {
    const form = new URLSearchParams({ ...(this.csrf === undefined ? {} : { _csrf: this.csrf }), ...fields });
    return this.request('POST', path, form.toString(), { 'content-type': 'application/x-www-form-urlencoded', ...headers });
  }

  /** Signs in with a token the way the sign-in form does. */
  async signIn(token: string): Promise<WebAnswer> {
    const form = await this.get('/sign-in');
    const formToken = csrfIn(form.text);
    const answer = await this.post('/sign-in', { _csrf: formToken!, token });
    if (answer.status === 303) await this.get('/');
    return answer;
  }

  /** The Cookie header this client sends (for requests made outside it, such as a streamed /events). */
  cookieHeader(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  private async request(method: string, path: string, body: string | undefined, headers: Record<string, string>): Promise<WebAnswer> {
    const cookie = this.cookieHeader();
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      redirect: 'manual',
      headers: { accept: 'text/html', ...(cookie ? { cookie } : {}), ...headers },
      ...(body === undefined ? {} : { body }),
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      const name = pair!.slice(0, at);
      const value = pair!.slice(at + 1);
      if (/max-age=0/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const text = await response.text();
    this.csrf = csrfIn(text) ?? this.csrf;
    return { status: response.status, headers: response.headers, text };
  }
}

export function csrfIn(page: string): string | undefined {
  return /name="_csrf" value="([^"]*)"/.exec(page)?.[1];
}
