import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isConnectionFailure, MayHaveCommittedError } from '../db/connectionFailure.ts';
import { SlipwayError } from '../domain/errors.ts';

/**
 * Every error the API answers with has one JSON shape: `code` (stable, for
 * machines to branch on), `message` (one line for people), `details` (for
 * machines: the field, the state, the command that already did it...).
 */
export const ErrorBodySchema = z
  .object({
    code: z.string().meta({ description: 'stable, for machines to branch on, e.g. conflict, invalid_input' }),
    message: z.string().meta({ description: 'one line for people: what was wrong, and what would be right' }),
    details: z
      .record(z.string(), z.unknown())
      .meta({ description: 'for machines: the field, the state, the command that already did it, the request id...' }),
  })
  .meta({ id: 'Error' });
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** The API's own refusals (authentication, authorization, limits, idempotency), by code. */
const API_ERROR_STATUS = {
  unauthorized: 401,
  forbidden: 403,
  idempotency_key_reused: 422,
  busy: 409,
  too_many_requests: 429,
  backlog_full: 503,
  invalid_json: 400,
  forbidden_key: 400,
} as const;
type ApiErrorCode = keyof typeof API_ERROR_STATUS;

export class ApiError extends Error {
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    /** Seconds, sent as Retry-After. */
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  get statusCode(): number {
    return API_ERROR_STATUS[this.code];
  }
}

const SLIPWAY_ERROR_STATUS: Record<SlipwayError['code'], number> = {
  invalid_input: 400,
  not_found: 404,
  conflict: 409,
  unsupported_version: 409,
  over_quota: 429,
};

/**
 * fastify's own client errors (its codes are stable), as our codes and
 * messages: a body that is not JSON, too big, of a media type we do not
 * read, a URL that cannot be decoded, and so on.
 */
const FASTIFY_ERRORS: Record<string, { code: string; message: (error: FastifyError, request: FastifyRequest) => string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: {
    code: 'payload_too_large',
    message: () => 'the request body is too large for this server (SLIPWAY_API_BODY_LIMIT_BYTES)',
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'unsupported_media_type',
    message: (_error, request) => `send the body as application/json, not ${request.headers['content-type'] ?? 'without a content type'}`,
  },
  FST_ERR_BAD_URL: { code: 'invalid_url', message: () => 'the URL is not valid: a "%" must start a percent-encoded UTF-8 byte, like %20' },
  FST_ERR_MAX_PARAM_LENGTH: { code: 'invalid_url', message: () => 'the URL is not valid: a path segment is longer than 200 characters' },
};

/** A zod validation failure of one part of a request (params, querystring, body, headers). */
export class RequestValidationError extends Error {
  readonly statusCode = 400;
  constructor(
    readonly part: string,
    readonly issues: readonly z.core.$ZodIssue[],
  ) {
    super(issues.map((issue) => `${fieldName(part, issue.path)}: ${issue.message}`).join('; '));
    this.name = 'RequestValidationError';
  }
}

/** "body.payload.slot", "query.limit": the field the way a caller wrote it. */
function fieldName(part: string, path: readonly PropertyKey[]): string {
  const root = part === 'querystring' ? 'query' : part;
  return [root, ...path.map(String)].join('.');
}

/**
 * PostgreSQL's answers that end a transaction for a reason other than the
 * request: a broken lock cycle (40P01; e.g. a callback attached to a tree a
 * drain is settling, see attachCallback) and a serialization failure (40001).
 */
const RETRYABLE_DATABASE_CODES = new Set(['40P01', '40001']);

/** Seconds a client waits before trying again when the database is unreachable: long enough for a restart or failover to finish. */
const DATABASE_RETRY_AFTER_S = 2;

interface Answer {
  readonly status: number;
  readonly body: ErrorBody;
  readonly retryAfter?: number;
}

/** THE mapping from whatever stopped a request to its status code and body. */
export function answerFor(error: unknown, request: FastifyRequest): Answer {
  if (error instanceof ApiError) {
    return { status: error.statusCode, body: bodyOf(error.code, error.message, error.details), retryAfter: error.retryAfter };
  }
  if (error instanceof SlipwayError) {
    return { status: SLIPWAY_ERROR_STATUS[error.code], body: bodyOf(error.code, error.message, error.details) };
  }
  if (error instanceof RequestValidationError) {
    const fields = error.issues.map((issue) => ({
      field: fieldName(error.part, issue.path),
      message: issue.message,
      code: issue.code,
    }));
    return { status: 400, body: bodyOf('invalid_input', error.message, { field: fields[0]?.field, issues: fields }) };
  }
  if (error instanceof MayHaveCommittedError) {
    return {
      status: 503,
      body: bodyOf(
        'unavailable',
        'the database connection failed while the request was committing, so it may or may not have taken effect: send it again with the same Idempotency-Key (which answers what the first one did, or does it now), or read the object to see',
        { mayHaveCommitted: true },
      ),
      retryAfter: DATABASE_RETRY_AFTER_S,
    };
  }
  if (isConnectionFailure(error)) {
    // Every connection failure outside a COMMIT (MayHaveCommittedError above) ended the request's transaction uncommitted.
    return {
      status: 503,
      body: bodyOf(
        'unavailable',
        'the database is unavailable (its connection failed or was refused); nothing was written, send the request again shortly',
        { mayHaveCommitted: false },
      ),
      retryAfter: DATABASE_RETRY_AFTER_S,
    };
  }
  if (RETRYABLE_DATABASE_CODES.has(String((error as { code?: unknown }).code))) {
    // The request's transaction rolled back whole: nothing was written, and the same request will very likely go through.
    return {
      status: 503,
      body: bodyOf('try_again', 'the request met a lock conflict with other work and was rolled back; nothing was written, send it again', {}),
      retryAfter: 1,
    };
  }
  const fastifyError = error as FastifyError;
  const status = fastifyError.statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    const known = FASTIFY_ERRORS[fastifyError.code];
    if (known) return { status, body: bodyOf(known.code, known.message(fastifyError, request), {}) };
    return { status, body: bodyOf('invalid_input', fastifyError.message, {}) };
  }
  // Anything else is ours to fix: the client learns only that, never a stack.
  return { status: 500, body: bodyOf('internal', 'internal error; the server log has the details (search for the request id)', {}) };
}

function bodyOf(code: string, message: string, details: Record<string, unknown>): ErrorBody {
  return { code, message, details };
}

export function sendError(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  const answer = answerFor(error, request);
  if (answer.status >= 500) request.log.error({ err: error }, 'request failed');
  else request.log.info({ code: answer.body.code, status: answer.status }, answer.body.message);
  if (answer.retryAfter !== undefined) reply.header('retry-after', String(Math.ceil(answer.retryAfter)));
  return reply.code(answer.status).send({ ...answer.body, details: { ...answer.body.details, requestId: request.id } });
}

/** Installs the one error handler and the one "no such route" answer. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => sendError(request, reply, error));
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(
      bodyOf('no_such_route', `no route ${request.method} ${request.url.split('?')[0]}; see /v1/openapi.json`, {
        requestId: request.id,
      }),
    ),
  );
}
