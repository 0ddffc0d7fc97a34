import http from 'node:http';
import https from 'node:https';

/** What came back: the status and the body as text. */
export interface HttpReply {
  readonly status: number;
  readonly text: string;
}

export interface HttpAsk {
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly signal?: AbortSignal;
}

/**
 * One HTTP request and its whole answer, with node:http(s) rather than the
 * global fetch: the CLI makes one or two calls and exits, and loading
 * fetch's implementation (undici) on its first call would cost more than
 * the call. Rejects with the socket's error (its `code`: ECONNREFUSED...)
 * or the signal's abort.
 */
export function httpExchange(url: URL, ask: HttpAsk): Promise<HttpReply> {
  const transport = url.protocol === 'https:' ? https : http;
  const headers = ask.body === undefined ? ask.headers : { ...ask.headers, 'content-length': String(Buffer.byteLength(ask.body)) };
  return new Promise((resolve, reject) => {
    const request = transport.request(url, { method: ask.method, headers, signal: ask.signal }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(ask.body);
  });
}
