import { z } from 'zod';
import { CliFailure, EXIT } from '../exitStatus.ts';

/** One answer of the API: its status and its JSON body (timestamps as Dates). */
export interface ApiAnswer<T> {
  readonly status: number;
  readonly body: T;
}

/** The API's one error shape (src/api/errors.ts). */
const ErrorBody = z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() });

/** API refusals as the CLI's exit codes: the same codes a local run exits with for the same refusal. */
const EXIT_BY_STATUS: Readonly<Record<number, number>> = {
  400: EXIT.usage,
  401: EXIT.denied,
  403: EXIT.denied,
  404: EXIT.notFound,
  409: EXIT.conflict,
};

/**
 * Timestamps arrive as ISO text; the views format Dates. Revived by name
 * (the schema's convention: created_at, idle_since, heartbeat_deadline, at...)
 * and only in toISOString's exact form, so a --json print is byte-identical.
 */
const TIMESTAMP_KEY = /(^|_)(at|since|before|deadline)$/;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const reviveTimestamps = (key: string, value: unknown) =>
  typeof value === 'string' && TIMESTAMP_KEY.test(key) && ISO_TIME.test(value) ? new Date(value) : value;

/**
 * The CLI's client of the Slipway API (fetch: keep-alive, http and https):
 * a bearer token it never prints, and every failure turned into the CLI's
 * one-line error with its exit code. Requests stop when `signal` aborts.
 */
export class ApiCaller {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    /** Aborted by SIGINT/SIGTERM: stops a request or a wait. */
    readonly signal: AbortSignal,
  ) {}

  get<T>(path: string): Promise<T> {
    return this.call<T>('GET', path).then((answer) => answer.body);
  }

  post<T>(path: string, body: unknown): Promise<ApiAnswer<T>> {
    return this.call<T>('POST', path, body);
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<ApiAnswer<T>> {
    const url = new URL(path, this.baseUrl);
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, {
        method,
        signal: this.signal,
        headers: {
          accept: 'application/json',
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      text = await response.text();
    } catch (error) {
      if (this.signal.aborted) throw new CliFailure(`stopped waiting for ${method} ${url.pathname}`, EXIT.interrupted);
      const cause = (error as Error & { cause?: { code?: string; message?: string } }).cause;
      throw new CliFailure(`cannot reach the Slipway API at ${url.origin} (SLIPWAY_URL): ${cause?.code ?? cause?.message ?? (error as Error).message}`, EXIT.failed);
    }
    const parsed = parseJson(text);
    if (response.ok) return { status: response.status, body: parsed as T };
    throw refusal(response, parsed, `${method} ${url.pathname}`);
  }
}

function parseJson(text: string): unknown {
  try {
    return text === '' ? null : (JSON.parse(text, reviveTimestamps) as unknown);
  } catch {
    return undefined;
  }
}

/** An error answer as the CLI's one-line error: the API's own message, with the exit code of its status. */
function refusal(response: Response, body: unknown, request: string): CliFailure {
  const error = ErrorBody.safeParse(body);
  if (!error.success) {
    return new CliFailure(`${request}: the server answered ${response.status} without a Slipway error; is SLIPWAY_URL the Slipway API?`, EXIT.failed);
  }
  // The API's messages already say when to retry (429, 503).
  const exitCode = (EXIT_BY_STATUS[response.status] ?? EXIT.failed) as CliFailure['exitCode'];
  // The request id is the server's business; the rest is the refusal.
  const { requestId: _requestId, ...details } = error.data.details ?? {};
  return new CliFailure(error.data.message, exitCode, { code: error.data.code, details });
}
