import { type Kysely, sql } from 'kysely';

/**
 * Lease time limits (docs/scheduling.md, "Lease time limits"; decision 0039).
 *
 * - `blueprints.max_hold_ms`: the longest a lease of the blueprint may be
 *   held, from its grant to its end, renewals included (null: no limit).
 * - `leases.granted_at`: when the lease got its slot (its grant).
 * - `leases.end_by`: the time by which the lease ends whatever its holder
 *   does: its grant plus its blueprint's longest hold, fixed by the grant.
 *   No expiry is set or renewed past it, and the timekeepers release the
 *   lease when it passes, as they do for an expiry.
 * - `leases.end_notice_at`: when the holder is to be told the end is near
 *   (null once told); the timekeepers ask the lease's drain to tell it then.
 * - `leases.ending`: what the holder has been told, `{kind, at, reason}`,
 *   written by the lease's own drain; kind `time_limit` (preemption's
 *   grace period will tell the same way).
 *
 * The partial indexes keep the timekeepers' looks at the leases past either
 * time index ranges, however many leases there are. Expand only: a worker
 * of the release before neither writes nor reads the columns; a lease it
 * grants has no limit (docs/upgrades.md).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table blueprints add column max_hold_ms bigint check (max_hold_ms > 0);
    alter table leases
      add column granted_at timestamptz,
      add column end_by timestamptz,
      add column end_notice_at timestamptz,
      add column ending jsonb;
    create index leases_end_due on leases (end_by)
      where end_by is not null and state in ('pending', 'acquired', 'active');
    create index leases_end_notice_due on leases (end_notice_at)
      where end_notice_at is not null and state in ('pending', 'acquired', 'active');
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table leases drop column granted_at, drop column end_by, drop column end_notice_at, drop column ending;
    alter table blueprints drop column max_hold_ms;
  `.execute(db);
}
