import http from 'node:http';

export interface JsonAnswer<T = unknown> {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: T;
}

/**
 * A small client of the Slipway API: JSON in and out, a bearer token, and
 * its own keep-alive connections (at most `connections` at once), so that
 * several of them behave like several separate callers.
 */
export class HttpJsonClient {
  private readonly agent: http.Agent;
  private readonly base: URL;

  constructor(
    baseUrl: string,
    private readonly token: string | null,
    options: { connections?: number } = {},
  ) {
    this.base = new URL(baseUrl);
    this.agent = new http.Agent({ keepAlive: true, maxSockets: options.connections ?? 8 });
  }

  request<T = unknown>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<JsonAnswer<T>> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const request = http.request(
        new URL(path, this.base),
        {
          method,
          agent: this.agent,
          headers: {
            accept: 'application/json',
            ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
            ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
            ...headers,
          },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            try {
              resolve({ status: response.statusCode ?? 0, headers: response.headers, body: (text === '' ? null : JSON.parse(text)) as T });
            } catch (error) {
              reject(new Error(`${method} ${path}: answer is not JSON (${response.statusCode}): ${text.slice(0, 200)}`, { cause: error }));
            }
          });
        },
      );
      request.on('error', reject);
      request.end(payload);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
