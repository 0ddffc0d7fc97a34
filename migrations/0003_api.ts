import { type Kysely, sql } from 'kysely';

/**
 * What the HTTP API keeps: its bearer tokens (only a hash of each secret),
 * the Idempotency-Key records of POST requests, and where each command came
 * from (client address and user agent, next to the request id it already has).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table api_tokens (
      id bigint generated always as identity primary key,
      name text not null unique check (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
      role text not null check (role in ('viewer', 'user', 'operator', 'admin')),
      -- sha256 of the secret, hex: the secret itself is shown once and never stored
      secret_sha256 text not null unique,
      created_by text not null,
      created_at timestamptz not null default now(),
      last_used_at timestamptz,
      revoked_at timestamptz
    );

    -- One row per (token, Idempotency-Key). Claimed in the same transaction
    -- as the request's effect, so a key is recorded if and only if the
    -- effect is. 'in_progress' until the response is final (a ?wait request
    -- records its 202 first, then its final answer after waiting).
    create table idempotency_keys (
      token_id bigint not null references api_tokens (id) on delete cascade,
      key text not null,
      request_sha256 text not null,
      state text not null check (state in ('in_progress', 'completed')),
      response_status int,
      response_headers jsonb,
      response_body jsonb,
      created_at timestamptz not null default now(),
      primary key (token_id, key)
    );
    create index idempotency_keys_by_age on idempotency_keys (created_at);

    alter table commands add column client_address text, add column user_agent text;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table commands drop column client_address, drop column user_agent;
    drop table idempotency_keys, api_tokens;
  `.execute(db);
}
