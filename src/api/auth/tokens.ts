import { createHash, randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { z } from 'zod';
import type { ApiTokenRow, TokenRole } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError, NotFoundError } from '../../domain/errors.ts';
import { DEFAULT_TEAM, TeamNameSchema } from '../../domain/team.ts';
import { assertTeamExists } from '../../objects/teams.ts';
import { ROLES } from './roles.ts';
import { announceRevocation } from './tokenRevocations.ts';
import { formatTime } from '../../domain/times.ts';

/**
 * API tokens. A token is `slw_` + 32 random bytes (base64url). Only its
 * SHA-256 is stored: the secret has 256 bits of entropy, so a fast hash is
 * enough (nothing to brute-force, unlike a password, which would need a slow
 * salted hash), and it lets a request find its token with one indexed lookup.
 * Whoever reads the table learns no usable token.
 */
const PREFIX = 'slw_';

export const TokenInputSchema = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'use 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit'),
    role: z.enum(ROLES),
    /** The team its leases belong to (docs/scheduling.md); `default` unless given. */
    team: TeamNameSchema.optional(),
  })
  .strict();
export type TokenInput = z.input<typeof TokenInputSchema>;

/** A token as listed: never its secret, nor its hash. */
export type TokenView = Omit<ApiTokenRow, 'secret_sha256'>;

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** The actor a token's requests are recorded as. */
export function tokenActorName(name: string): string {
  return `token:${name}`;
}

const TOKEN_COLUMNS = ['id', 'name', 'role', 'team', 'created_by', 'created_at', 'last_used_at', 'revoked_at'] as const;

/** Creates a token; the returned secret is the only copy there will ever be. */
export async function createToken(db: Db, input: TokenInput, createdBy: string): Promise<{ token: TokenView; secret: string }> {
  const parsed = TokenInputSchema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid token: ${describeZodIssues(parsed.error.issues)}`);
  const team = parsed.data.team ?? DEFAULT_TEAM;
  await assertTeamExists(db, team);
  const secret = PREFIX + randomBytes(32).toString('base64url');
  const row = await db
    .insertInto('api_tokens')
    .values({ name: parsed.data.name, role: parsed.data.role, team, secret_sha256: hashSecret(secret), created_by: createdBy })
    .onConflict((oc) => oc.column('name').doNothing())
    .returning(TOKEN_COLUMNS)
    .executeTakeFirst();
  if (!row) throw new CommandRejectedError(`a token named "${parsed.data.name}" already exists`, { field: 'name' });
  return { token: row, secret };
}

export function listTokens(db: Db): Promise<TokenView[]> {
  return db.selectFrom('api_tokens').select(TOKEN_COLUMNS).orderBy('id').execute();
}

/** Revokes a token by name; revoking one already revoked is refused, saying when it was. */
export async function revokeToken(db: Db, name: string): Promise<TokenView> {
  const row = await db
    .updateTable('api_tokens')
    .set({ revoked_at: sql<Date>`now()` })
    .where('name', '=', name)
    .where('revoked_at', 'is', null)
    .returning(TOKEN_COLUMNS)
    .executeTakeFirst();
  if (row) {
    await announceRevocation(db, row.id);
    return row;
  }
  const existing = await db.selectFrom('api_tokens').select('revoked_at').where('name', '=', name).executeTakeFirst();
  if (!existing) throw new NotFoundError('token', name);
  throw new CommandRejectedError(`token ${name} was already revoked at ${formatTime(existing.revoked_at!)}`, {
    revokedAt: existing.revoked_at,
  });
}

export interface LiveToken {
  readonly id: number;
  readonly name: string;
  readonly role: TokenRole;
  /** The team its leases belong to. */
  readonly team: string;
}

/** The live (not revoked) token whose secret this is. */
export async function findLiveToken(db: Db, secret: string): Promise<LiveToken | undefined> {
  if (!secret.startsWith(PREFIX)) return undefined;
  return db
    .selectFrom('api_tokens')
    .select(['id', 'name', 'role', 'team'])
    .where('secret_sha256', '=', hashSecret(secret))
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
}

export async function markUsed(db: Db, tokenId: number): Promise<void> {
  await db.updateTable('api_tokens').set({ last_used_at: sql<Date>`now()` }).where('id', '=', tokenId).execute();
}
