import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import { z } from 'zod';
import type { Db } from '../db/Database.ts';
import { describeZodIssues, InvalidInputError } from '../domain/errors.ts';
import { ApiError } from './errors.ts';

/** What a POST answered: replayed as is for a repeated Idempotency-Key. */
export interface StoredResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: unknown;
}

/** A claimed key: the request's transaction records its response with it. */
export interface ClaimedKey {
  readonly tokenId: number;
  readonly key: string;
}

const KeySchema = z
  .string()
  .min(1, 'must not be empty')
  .max(200, 'use at most 200 characters')
  .regex(/^[\x21-\x7e]+$/, 'use printable ASCII without spaces (a UUID is a good key)');

/** The Idempotency-Key header, validated; undefined when absent. */
export function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return undefined;
  const parsed = KeySchema.safeParse(header);
  if (!parsed.success) {
    throw new InvalidInputError(`invalid Idempotency-Key header: ${describeZodIssues(parsed.error.issues)}`, {
      field: 'headers.idempotency-key',
    });
  }
  return parsed.data;
}

/**
 * What makes two requests "the same": method, path with query, and body
 * (keys sorted, so the order a client wrote them in does not matter).
 */
export function requestFingerprint(request: FastifyRequest): string {
  return createHash('sha256')
    .update(`${request.method} ${request.url}\n${canonicalJson(request.body ?? null)}`)
    .digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Claims `key` for this token inside the request's transaction. Returns
 * undefined when the key is fresh (or expired, and so reused): the caller
 * goes on and records its response. Returns the stored response to replay
 * when the same request already took effect: its final answer, or, while
 * its `?wait` is still waiting or was cut off, its 202. Throws 422 for the
 * key reused with another request.
 *
 * A concurrent request with the same key blocks on the row's unique index
 * until the first transaction ends, then sees its outcome: a key is never
 * claimed twice.
 */
export async function claimKey(trx: Db, claim: ClaimedKey, fingerprint: string, keepHours: number): Promise<StoredResponse | undefined> {
  const claimed = await sql<{ claimed: boolean }>`
    insert into idempotency_keys (token_id, key, request_sha256, state)
    values (${claim.tokenId}, ${claim.key}, ${fingerprint}, 'in_progress')
    on conflict (token_id, key) do update
      set request_sha256 = excluded.request_sha256, state = 'in_progress', response_status = null,
          response_headers = null, response_body = null, created_at = now()
      where idempotency_keys.created_at < now() - make_interval(hours => ${keepHours})
    returning true as claimed
  `.execute(trx);
  if (claimed.rows.length > 0) return undefined;

  const existing = await trx
    .selectFrom('idempotency_keys')
    .select(['request_sha256', 'response_status', 'response_headers', 'response_body'])
    .where('token_id', '=', claim.tokenId)
    .where('key', '=', claim.key)
    .executeTakeFirstOrThrow();
  if (existing.request_sha256 !== fingerprint) {
    throw new ApiError(
      'idempotency_key_reused',
      `Idempotency-Key "${claim.key}" was already used for a different request (another path, query or body); use a new key`,
      { key: claim.key },
    );
  }
  // Every committed key has an answer: its request recorded one in the
  // transaction that claimed it. A key an older release left `in_progress`
  // (its request was still waiting, or was cut off) replays that answer too.
  if (existing.response_status === null) throw new Error(`Idempotency-Key "${claim.key}" was committed without an answer`);
  return storedOf(existing);
}

function storedOf(row: { response_status: number | null; response_headers: unknown; response_body: unknown }): StoredResponse {
  return { status: row.response_status!, headers: row.response_headers as Record<string, string>, body: row.response_body };
}

/**
 * Records the answer of a claimed key's request: its first answer in the
 * transaction that claimed the key, and a waiting request's final answer
 * over it once the wait is over.
 */
export async function recordResponse(db: Db, claim: ClaimedKey, response: StoredResponse): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({
      state: 'completed',
      response_status: response.status,
      response_headers: JSON.stringify(response.headers),
      response_body: JSON.stringify(response.body),
    })
    .where('token_id', '=', claim.tokenId)
    .where('key', '=', claim.key)
    .execute();
}

/** Forgets keys older than `keepHours`; returns how many. */
export async function pruneKeys(db: Db, keepHours: number): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<', sql<Date>`now() - make_interval(hours => ${keepHours})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
