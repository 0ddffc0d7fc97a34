import { z } from 'zod';
import type { CommandRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { withTransaction } from '../db/withTransaction.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError, NotFoundError } from '../domain/errors.ts';
import { takesLeases } from '../domain/lifecycle.ts';
import type { LeaseView } from '../read/leases.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { deadlinesFromNow } from './leaseDeadlines.ts';
import { recordEvent } from './recordEvent.ts';

const DAY_MS = 24 * 3600 * 1000;

/**
 * How long a lease lives, shared by every interface that creates leases (the
 * CLI's and the API's bodies are this plus their own fields).
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
};

type ExpiryOutput = z.output<z.ZodObject<typeof LEASE_EXPIRY_FIELDS>>;

/** A strict lease body: `fields` plus the expiry fields, with at most one of expiresAt and expiresInMs. */
export function leaseBodySchema<Fields extends z.ZodRawShape>(fields: Fields) {
  return z
    .object({ ...fields, ...LEASE_EXPIRY_FIELDS })
    .strict()
    .refine((lease) => (lease as ExpiryOutput).expiresAt === undefined || (lease as ExpiryOutput).expiresInMs === undefined, {
      message: 'give expiresAt or expiresInMs, not both',
      path: ['expiresInMs'],
    });
}

export const LeaseInputSchema = leaseBodySchema({
  /** The blueprint's name or id. */
  blueprint: z.union([z.string().min(1).max(63), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)]),
  holder: z.string().min(1).max(200),
  /** The requester's own labels, kept on the lease beside what the driver reports. */
  attributes: z.record(z.string(), z.unknown()).optional(),
});
export type LeaseInput = z.input<typeof LeaseInputSchema>;

/**
 * Creates a lease and queues its first command, `allocate`, in one
 * transaction: the one place (with resource creation) where a row is written
 * without holding its lock, because nobody else can know of it yet.
 */
export async function createLease(db: Db, input: LeaseInput, actor: Actor): Promise<{ lease: LeaseView; command: CommandRow }> {
  return withTransaction(db, (trx) => createLeaseInTransaction(trx, input, actor));
}

/** The same, inside a caller's transaction (the API's, which records an Idempotency-Key with it). */
export async function createLeaseInTransaction(trx: Db, input: LeaseInput, actor: Actor): Promise<{ lease: LeaseView; command: CommandRow }> {
  const parsed = LeaseInputSchema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid lease: ${describeZodIssues(parsed.error.issues)}`);
  const { blueprint: ref, holder, expiresAt, expiresInMs, heartbeatMs, attributes } = parsed.data;
  const blueprint = await trx
    .selectFrom('blueprints')
    .select(['id', 'name', 'state'])
    .where(typeof ref === 'number' ? 'id' : 'name', '=', ref)
    .executeTakeFirst();
  if (!blueprint) throw new NotFoundError('blueprint', ref);
  if (!takesLeases('blueprint', blueprint.state)) {
    throw new CommandRejectedError(`blueprint ${blueprint.name} is ${blueprint.state}; it takes no new leases`, {
      state: blueprint.state,
    });
  }
  // An absolute expiry's term (for renewals) is what was left of it when asked.
  const termMs = expiresInMs ?? (expiresAt ? expiresAt.getTime() - Date.now() : undefined);
  // The heartbeat clock starts when the lease becomes active (see the lease's
  // activate): a holder waiting for capacity has nothing to beat for yet.
  const { expires_at } = await deadlinesFromNow(trx, { termMs: expiresInMs });
  const lease = await trx
    .insertInto('leases')
    .values({
      blueprint_id: blueprint.id,
      holder,
      expires_at: expires_at ?? expiresAt ?? null,
      term_ms: termMs === undefined ? null : Math.max(1000, Math.round(termMs)),
      heartbeat_ms: heartbeatMs ?? null,
      attributes: JSON.stringify(attributes ?? {}),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  const target = { kind: 'lease', id: lease.id } as const;
  const { command } = await appendInTransaction(trx, { target, kind: 'allocate', actor }, { fromOutside: false });
  await recordEvent(trx, {
    target,
    type: 'created',
    toState: lease.state,
    message: `requested on ${blueprint.name} for ${holder}`,
    actor,
    commandId: command.id,
  });
  return { lease: { ...lease, blueprint_name: blueprint.name }, command };
}
