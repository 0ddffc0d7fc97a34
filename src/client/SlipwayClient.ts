import type { z } from 'zod';
import { OPERATIONS, type Operations } from '../api/contract.ts';
import { ErrorBodySchema } from '../api/errors.ts';
import { ApiLeaseService, type LeaseRequestInput } from './ApiLeaseService.ts';
import { ApiRefusal, UnexpectedAnswer, Unreachable } from './errors.ts';
import { holdLease, type HeldLease, type HoldOptions } from './holdLease.ts';
import { httpExchange, type HttpReply } from './httpExchange.ts';

/**
 * A typed client of the Slipway HTTP API, made from the same operation table
 * the server's routes are declared from (src/api/contract.ts): each call's
 * input is typed by the operation's request schemas, and each answer is
 * parsed with the schema of its status code, so what a caller gets is what
 * the OpenAPI document promises, or an error saying how the server strayed.
 * The CLI's remote mode (SLIPWAY_URL) goes through it.
 *
 * This is the package's `slipway/client` (docs/client.md).
 */

export type OperationName = keyof Operations;
type Op<N extends OperationName> = Operations[N];

/** Path and query values go as text; numbers are written out. */
type Textual<T> = { [K in keyof T]: T[K] extends string | undefined ? T[K] | number : T[K] };

type PartInput<O, K extends string> = O extends { [P in K]: infer S extends z.ZodType } ? Textual<z.input<S>> : never;

/** What a call sends: the operation's path parameters, query and body, each only where it has one. */
export type CallInput<N extends OperationName> = ([PartInput<Op<N>, 'params'>] extends [never] ? unknown : { params: PartInput<Op<N>, 'params'> }) &
  ([PartInput<Op<N>, 'query'>] extends [never] ? unknown : { query?: PartInput<Op<N>, 'query'> }) &
  (Op<N> extends { body: infer S extends z.ZodType } ? { body: z.input<S> } : unknown) & {
    /** An Idempotency-Key for a POST. */
    idempotencyKey?: string;
  };

/** A successful answer: its status and its body, parsed with the operation's schema for that status. */
export type CallAnswer<N extends OperationName> = {
  [C in keyof Op<N>['responses']]: {
    readonly status: C;
    readonly body: Op<N>['responses'][C] extends { schema: infer S extends z.ZodType } ? z.output<S> : never;
  };
}[keyof Op<N>['responses']];

export interface ClientOptions {
  /** Where the API is, e.g. http://127.0.0.1:7480. */
  readonly baseUrl: string;
  /** A bearer token (`slipway token create`). */
  readonly token: string;
  /** Stops a request in flight (and a `?wait` with it). */
  readonly signal?: AbortSignal;
}

export class SlipwayClient {
  constructor(private readonly options: ClientOptions) {}

  get signal(): AbortSignal | undefined {
    return this.options.signal;
  }

  /**
   * Holds a lease for exactly as long as `work` runs: requests it (a
   * heartbeat lease: every 30 s unless the request names its interval),
   * waits until it is active, runs `work`, beats the heartbeat while it
   * runs, aborts `signal` when the lease ends from outside or Slipway says
   * it will end it (the lease's `ending`: a time limit near), and releases
   * it when `work` settles, however it settles. Rejects with
   * LeaseNotGranted when the lease is never active, LeaseLost when it ended
   * while `work` ran, LeaseEnding when `work` was stopped for its end,
   * LeaseUnreachable when Slipway could not be reached for as long as
   * the heartbeat deadline allows; else settles as `work` did.
   *
   * The client's own `signal` stops every call, the release too: stop a
   * lease with `options.signal` instead.
   */
  withLease<T>(request: LeaseRequestInput, work: (held: HeldLease, signal: AbortSignal) => Promise<T>, options?: HoldOptions<T>): Promise<T> {
    return holdLease(new ApiLeaseService(this), request, work, options);
  }

  /**
   * Calls one operation. Resolves with its answer for a status the operation
   * declares; rejects with ApiRefusal for an error answer, UnexpectedAnswer
   * for anything else, Unreachable when the server cannot be reached, and
   * the signal's abort error when it aborts.
   */
  async call<N extends OperationName>(name: N, input: CallInput<N>): Promise<CallAnswer<N>> {
    const op = OPERATIONS[name];
    const { params, query, body, idempotencyKey } = input as {
      params?: Record<string, unknown>;
      query?: Record<string, unknown>;
      body?: unknown;
      idempotencyKey?: string;
    };
    const url = new URL(pathOf(op.url, params) + queryOf(query), this.options.baseUrl);
    const request = `${op.method} ${url.pathname}`;
    let reply: HttpReply;
    try {
      reply = await httpExchange(url, {
        method: op.method,
        signal: this.options.signal,
        headers: {
          accept: 'application/json',
          authorization: `Bearer ${this.options.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      if (this.options.signal?.aborted) throw error;
      const { code, message } = error as NodeJS.ErrnoException;
      throw new Unreachable(url.origin, code ?? message);
    }
    const { status, text } = reply;
    const json = parseJson(text);
    const answer = (op.responses as Record<number, { schema: z.ZodType } | undefined>)[status];
    if (answer) {
      const parsed = answer.schema.safeParse(json);
      if (!parsed.success) {
        throw new UnexpectedAnswer(
          `${request}: the ${status} answer is not what the API describes: ${parsed.error.issues[0]?.message}`,
          status,
          request,
        );
      }
      return { status, body: parsed.data } as CallAnswer<N>;
    }
    const refusal = ErrorBodySchema.safeParse(json);
    if (status >= 400 && refusal.success) throw new ApiRefusal(status, refusal.data, request);
    throw new UnexpectedAnswer(`${request}: the server answered ${status} without a Slipway answer; is this the Slipway API?`, status, request);
  }
}

/** `/v1/leases/:id` with its parameters filled in, each encoded. */
function pathOf(template: string, params: Record<string, unknown> = {}): string {
  return template.replace(/:(\w+)/g, (_match, name: string) => encodeURIComponent(String(params[name])));
}

/** `?a=1&b=x` from the values given. */
function queryOf(values: Record<string, unknown> = {}): string {
  const given = Object.entries(values).filter(([, value]) => value !== undefined);
  return given.length === 0 ? '' : `?${new URLSearchParams(given.map(([key, value]) => [key, String(value)]))}`;
}

function parseJson(text: string): unknown {
  try {
    return text === '' ? undefined : (JSON.parse(text) as unknown);
  } catch {
    return undefined;
  }
}
