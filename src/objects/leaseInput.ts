import { z } from 'zod';
import { SelectorSchema } from '../domain/labels.ts';
import { PrioritySchema } from '../domain/priority.ts';
import { TeamNameSchema } from '../domain/team.ts';

// A lease's input schemas, apart from the code that creates leases: the API's
// contract, and so the client library and the CLI's remote mode, use them
// without loading the database or the command queue.

const DAY_MS = 24 * 3600 * 1000;

/**
 * How long a lease may wait and how long it lives, shared by every interface
 * that creates leases (the CLI's and the API's bodies are this plus their own
 * fields).
 */
const LEASE_EXPIRY_FIELDS = {
  /** An absolute expiry, with its offset, e.g. 2030-01-01T12:00:00Z. */
  expiresAt: z.iso
    .datetime({ offset: true, message: 'expected an ISO 8601 time with its offset, e.g. 2030-01-01T12:00:00Z' })
    .transform((text) => new Date(text))
    .refine((at) => at.getTime() > Date.now(), 'must be in the future')
    .optional(),
  /** Relative expiry; also the term a renewal without its own extends the lease by. */
  expiresInMs: z
    .number()
    .int()
    .min(1000, 'expected at least 1 s')
    .max(366 * DAY_MS)
    .optional(),
  /** A heartbeat lease: released when its holder stops renewing it (see leaseDeadlines). */
  heartbeatMs: z.number().int().min(1000, 'expected at least 1 s').max(DAY_MS).optional(),
  /** The wait deadline: not active this long after the request, the lease is released as `system:deadline`. */
  waitTimeoutMs: z
    .number()
    .int()
    .min(1000, 'expected at least 1 s')
    .max(366 * DAY_MS)
    .optional(),
};

type ExpiryOutput = z.output<z.ZodObject<typeof LEASE_EXPIRY_FIELDS>>;

/** A strict lease body: `fields` plus the expiry fields, with at most one of expiresAt and expiresInMs, and a blueprint or a selector. */
export function leaseBodySchema<Fields extends z.ZodRawShape>(fields: Fields) {
  return z
    .object({ ...fields, ...LEASE_EXPIRY_FIELDS })
    .strict()
    .refine((lease) => (lease as ExpiryOutput).expiresAt === undefined || (lease as ExpiryOutput).expiresInMs === undefined, {
      message: 'give expiresAt or expiresInMs, not both',
      path: ['expiresInMs'],
    })
    .refine(
      (lease) => (lease as Aimed).blueprint !== undefined || (lease as Aimed).selector !== undefined || (lease as Aimed).reservation !== undefined,
      {
        message: 'name a blueprint, a selector, or both, or a reservation',
        path: ['blueprint'],
      },
    );
}

type Aimed = { blueprint?: unknown; selector?: unknown; reservation?: unknown };

export const LeaseInputSchema = leaseBodySchema({
  /** The blueprint's name or id; left out, a selector chooses it (chooseBlueprint). */
  blueprint: z.union([z.string().min(1).max(63), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)]).optional(),
  /** What the lease needs of its resource's labels: granted only a slot whose resource matches it. */
  selector: SelectorSchema.optional(),
  holder: z.string().min(1).max(200),
  /** The requester's own labels, kept on the lease beside what the driver reports. */
  attributes: z.record(z.string(), z.unknown()).optional(),
  /** The holder's callback, already checked against the allow-list (the API's checkCallbackUrl). */
  callbackUrl: z.string().max(2048).optional(),
  /** 0–9 (the API checks it against the caller's role): where the lease joins its blueprint's line. */
  priority: PrioritySchema.optional(),
  /** The requester's team (the API's is its token's); `default` unless given. */
  team: TeamNameSchema.optional(),
  /** false: refused at once (OverQuotaError) when a quota of the team or holder is reached, rather than waiting in line. */
  queue: z.boolean().optional(),
  /** The reservation whose slots it is served from, ahead of the line, during its window (its blueprint unless `blueprint` says so). */
  reservation: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
  /** false: not to be preempted, up to its blueprint's preemption.protectedPerTeam for its team (refused at once beyond it). */
  preemptible: z.boolean().optional(),
});
export type LeaseInput = z.input<typeof LeaseInputSchema>;
