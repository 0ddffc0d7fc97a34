import { type Kysely, sql } from 'kysely';

/**
 * What the web UI keeps: its sessions, and the indexes its lists need.
 *
 * A session row holds only the SHA-256 of the session id the browser keeps
 * in its cookie (like api_tokens, a 256-bit random secret needs no slow
 * hash), the token it was opened with (a revoked or deleted token ends its
 * sessions), and the session's CSRF token, which forms carry in a hidden
 * field.
 *
 * The lists page newest first by id under one filter at a time; each
 * filter has an index that yields its rows in id order, so a page is an
 * index range scan of `limit` rows however many hundred thousand match.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table web_sessions (
      id_sha256 text primary key,
      token_id bigint not null references api_tokens (id) on delete cascade,
      csrf_token text not null,
      created_at timestamptz not null default now(),
      expires_at timestamptz not null
    );
    create index web_sessions_by_expiry on web_sessions (expires_at);

    create index leases_by_state_id on leases (state, id);
    create index leases_by_holder_id on leases (holder, id);
    create index leases_by_blueprint_id on leases (blueprint_id, id);
    create index resources_by_state_id on resources (state, id);
    create index resources_by_blueprint_id on resources (blueprint_id, id);
    create index commands_by_status_id on commands (status, id);
    create index commands_by_issuer_id on commands (issued_by, id);
    create index commands_by_source_id on commands (source, id);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop index leases_by_state_id, leases_by_holder_id, leases_by_blueprint_id,
      resources_by_state_id, resources_by_blueprint_id,
      commands_by_status_id, commands_by_issuer_id, commands_by_source_id;
    drop table web_sessions;
  `.execute(db);
}
