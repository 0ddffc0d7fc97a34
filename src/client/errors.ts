import type { ErrorBody } from '../api/errors.ts';

/**
 * What a call of the Slipway API can fail with, besides the caller's own
 * abort: the API's refusal, an answer that is not the API's, or no answer.
 */

/** The API refused the request: its status and its error body (code, message, details). */
export class ApiRefusal extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
    readonly request: string,
  ) {
    super(body.message);
    this.name = 'ApiRefusal';
  }
}

/** The server answered something the API does not: not the Slipway API, or a fault of it. */
export class UnexpectedAnswer extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly request: string,
  ) {
    super(message);
    this.name = 'UnexpectedAnswer';
  }
}

/** The server could not be asked: refused, unresolvable, reset. `reason` is the system's code (ECONNREFUSED...) when there is one. */
export class Unreachable extends Error {
  constructor(
    readonly origin: string,
    readonly reason: string,
  ) {
    super(`cannot reach the Slipway API at ${origin}: ${reason}`);
    this.name = 'Unreachable';
  }
}
