/**
 * Errors a caller of Slipway can meet, each with a stable code. Interfaces
 * (CLI, HTTP) map them to exit codes and status codes in one place; the
 * message is for people, `details` for machines.
 */
export class SlipwayError extends Error {
  constructor(
    readonly code: 'invalid_input' | 'not_found' | 'conflict' | 'unsupported_version' | 'over_quota',
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class InvalidInputError extends SlipwayError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('invalid_input', message, details);
  }
}

export class NotFoundError extends SlipwayError {
  /** `hint`: how to make it, where the caller may. */
  constructor(kind: string, id: number | string, hint?: string) {
    super('not_found', `${kind} ${id} does not exist${hint ? `: ${hint}` : ''}`, { kind, id });
  }
}

/** The target's state (or queue) makes the command impossible. */
export class CommandRejectedError extends SlipwayError {
  constructor(message: string, details: Record<string, unknown>) {
    super('conflict', message, details);
  }
}

/** A request that asked not to wait (`queue: false`) while a quota of its team or holder is reached. */
export class OverQuotaError extends SlipwayError {
  constructor(message: string, details: Record<string, unknown>) {
    super('over_quota', message, details);
  }
}

/**
 * Workers are running, and none of them runs this command kind's version
 * (a rolling upgrade not yet done, or a client ahead of the fleet): queued,
 * the command would wait for a worker that may never come.
 */
export class UnsupportedVersionError extends SlipwayError {
  constructor(message: string, details: Record<string, unknown>) {
    super('unsupported_version', message, details);
  }
}

/** A zod failure as one readable line: "payload.slot: expected a number". */
export function describeZodIssues(issues: readonly { path: readonly PropertyKey[]; message: string }[], root = ''): string {
  return issues
    .map((issue) => {
      const where = [root, ...issue.path.map(String)].filter(Boolean).join('.');
      return where ? `${where}: ${issue.message}` : issue.message;
    })
    .join('; ');
}
