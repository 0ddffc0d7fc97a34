/**
 * Whether an error means the database connection failed (the server is down,
 * restarting, refusing connections, or dropped this one) rather than that
 * PostgreSQL refused what was asked: the one classification the API, the web
 * UI and the worker share, so each answers "unavailable, try again" to the
 * same failures.
 */

/** SQLSTATEs of a connection that failed or was never made: class 08, the server shutting down or starting (57P01-57P03), and no connection slot left (53300). */
const CONNECTION_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
const CONNECTION_SQLSTATE_CLASS = '08';

/** Node's socket errors: the server is not there, or the connection to it broke. */
const SOCKET_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * pg and pg-pool report a lost connection, a client it left unusable and a
 * pool that could not connect in time by message only (no code).
 */
const CONNECTION_MESSAGES = [
  /^Connection terminated/,
  /^Client has encountered a connection error and is not queryable$/,
  /^Client was closed and is not queryable$/,
  /^timeout exceeded when trying to connect$/,
];

export function isConnectionFailure(error: unknown): boolean {
  return causesOf(error).some((e) => {
    const code = typeof e.code === 'string' ? e.code : '';
    return (
      CONNECTION_SQLSTATES.has(code) ||
      (code.length === 5 && code.startsWith(CONNECTION_SQLSTATE_CLASS)) ||
      SOCKET_ERROR_CODES.has(code) ||
      // Any failed connect, e.g. ENOENT: no server socket at a Unix-socket path (the embedded server is down).
      e.syscall === 'connect' ||
      CONNECTION_MESSAGES.some((pattern) => pattern.test(String(e.message)))
    );
  });
}

interface FailureFields {
  readonly code?: unknown;
  readonly message?: unknown;
  readonly syscall?: unknown;
}

/**
 * The error and what it wraps: its `cause` chain and, for an AggregateError
 * (a connect that tried several addresses), each attempt's error.
 */
function causesOf(error: unknown): Array<FailureFields> {
  const found: Array<FailureFields> = [];
  const pending: unknown[] = [error];
  while (pending.length > 0 && found.length < 20) {
    const next = pending.shift();
    if (typeof next !== 'object' || next === null) continue;
    found.push(next);
    const { cause, errors } = next as { cause?: unknown; errors?: unknown };
    if (cause !== undefined) pending.push(cause);
    if (Array.isArray(errors)) pending.push(...errors);
  }
  return found;
}

/**
 * A connection that failed after writes were sent for commit (the COMMIT
 * itself, or a batch of appends ending in one): whether they committed is
 * unknown. The caller must not be told "nothing was written"; it replays
 * the request with the same Idempotency-Key, or reads the object, to learn.
 */
export class MayHaveCommittedError extends Error {
  override name = 'MayHaveCommittedError';
  constructor(override readonly cause: unknown) {
    super(`the database connection failed while the writes were committing: ${(cause as Error)?.message ?? String(cause)}`);
  }
}

/** `error` as a MayHaveCommittedError when it is a connection failure; as it is otherwise. */
export function afterCommitWasSent(error: unknown): unknown {
  return isConnectionFailure(error) && !(error instanceof MayHaveCommittedError) ? new MayHaveCommittedError(error) : error;
}
