export interface ApiAnswer<T = any> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
}

export interface CallOptions {
  /** A JSON body. */
  readonly body?: unknown;
  /** A body sent as is (malformed JSON, another media type). */
  readonly rawBody?: string;
  readonly contentType?: string;
  readonly headers?: Record<string, string>;
}

/** A caller of a test server: one token (or none), plain fetch, JSON answers parsed. */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    readonly token: string | null,
  ) {}

  withToken(token: string | null): ApiClient {
    return new ApiClient(this.baseUrl, token);
  }

  get<T = any>(path: string, options: CallOptions = {}): Promise<ApiAnswer<T>> {
    return this.call('GET', path, options);
  }

  post<T = any>(path: string, body: unknown = {}, options: CallOptions = {}): Promise<ApiAnswer<T>> {
    return this.call('POST', path, { body, ...options });
  }

  async call<T = any>(method: string, path: string, options: CallOptions = {}): Promise<ApiAnswer<T>> {
    const hasBody = options.rawBody !== undefined || options.body !== undefined;
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...(hasBody ? { 'content-type': options.contentType ?? 'application/json' } : {}),
        ...options.headers,
      },
      ...(hasBody ? { body: options.rawBody ?? JSON.stringify(options.body) } : {}),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: (text === '' ? null : JSON.parse(text)) as T };
  }
}
