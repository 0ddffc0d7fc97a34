import { createHash, randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import type { LiveToken } from '../api/auth/tokens.ts';

/**
 * Web sessions live in a table (web_sessions), not in a signed cookie: sign-out
 * and token revocation end a session at once on every server, and the
 * browser holds only a random id whose SHA-256 is all the table keeps.
 * A session lasts SESSION_HOURS from sign-in, then the user signs in again.
 */
export const SESSION_HOURS = 12;

export interface WebSession {
  readonly token: LiveToken;
  /** The token every form of this session carries (see csrf.ts). */
  readonly csrfToken: string;
}

function hash(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}

export function randomSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** Opens a session for a live token; returns the id for the cookie (the only copy). Forgets expired sessions on the way. */
export async function openSession(db: Db, token: LiveToken): Promise<string> {
  const id = randomSecret();
  await db.deleteFrom('web_sessions').where('expires_at', '<', sql<Date>`now()`).execute();
  await db
    .insertInto('web_sessions')
    .values({
      id_sha256: hash(id),
      token_id: token.id,
      csrf_token: randomSecret(),
      expires_at: sql<Date>`now() + make_interval(hours => ${SESSION_HOURS})`,
    })
    .execute();
  return id;
}

/** The live session with this id: not expired, and its token not revoked. */
export async function findSession(db: Db, id: string): Promise<WebSession | undefined> {
  const row = await db
    .selectFrom('web_sessions')
    .innerJoin('api_tokens', 'api_tokens.id', 'web_sessions.token_id')
    .select(['api_tokens.id', 'api_tokens.name', 'api_tokens.role', 'api_tokens.team', 'web_sessions.csrf_token'])
    .where('web_sessions.id_sha256', '=', hash(id))
    .where('web_sessions.expires_at', '>', sql<Date>`now()`)
    .where('api_tokens.revoked_at', 'is', null)
    .executeTakeFirst();
  return row && { token: { id: row.id, name: row.name, role: row.role, team: row.team }, csrfToken: row.csrf_token };
}

export async function closeSession(db: Db, id: string): Promise<void> {
  await db.deleteFrom('web_sessions').where('id_sha256', '=', hash(id)).execute();
}
