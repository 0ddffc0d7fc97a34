import { z } from 'zod';
import type { CommandRow, LeaseRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError, NotFoundError } from '../domain/errors.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { recordEvent } from './recordEvent.ts';

export const LeaseInputSchema = z
  .object({
    /** The blueprint's name or id. */
    blueprint: z.union([z.string().min(1).max(63), z.number().int().positive()]),
    holder: z.string().min(1).max(200),
    expiresAt: z.coerce.date().optional(),
    /** The requester's own labels, kept on the lease beside what the driver reports. */
    attributes: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type LeaseInput = z.input<typeof LeaseInputSchema>;

/**
 * Creates a lease and queues its first command, `allocate`, in one
 * transaction: the one place (with resource creation) where a row is written
 * without holding its lock, because nobody else can know of it yet.
 */
export async function createLease(
  db: Db,
  input: LeaseInput,
  actor: Actor,
): Promise<{ lease: LeaseRow; command: CommandRow }> {
  return db.transaction().execute((trx) => createLeaseInTransaction(trx, input, actor));
}

/** The same, inside a caller's transaction (the API's, which records an Idempotency-Key with it). */
export async function createLeaseInTransaction(
  trx: Db,
  input: LeaseInput,
  actor: Actor,
): Promise<{ lease: LeaseRow; command: CommandRow }> {
  const parsed = LeaseInputSchema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid lease: ${describeZodIssues(parsed.error.issues)}`);
  const { blueprint: ref, holder, expiresAt, attributes } = parsed.data;
  if (expiresAt && expiresAt.getTime() <= Date.now()) {
    throw new InvalidInputError('expiresAt must be in the future', { field: 'expiresAt' });
  }
  const blueprint = await trx
    .selectFrom('blueprints')
    .select(['id', 'name', 'state'])
    .where(typeof ref === 'number' ? 'id' : 'name', '=', ref)
    .executeTakeFirst();
  if (!blueprint) throw new NotFoundError('blueprint', ref);
  if (blueprint.state !== 'enabled') {
    throw new CommandRejectedError(`blueprint ${blueprint.name} is ${blueprint.state}; it takes no new leases`, {
      state: blueprint.state,
    });
  }
  const lease = await trx
    .insertInto('leases')
    .values({ blueprint_id: blueprint.id, holder, expires_at: expiresAt ?? null, attributes: JSON.stringify(attributes ?? {}) })
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
  return { lease, command };
}
