import { type Kysely, sql } from 'kysely';

/**
 * Preemption (docs/scheduling.md, "Preemption"; decision 0043).
 *
 * - `blueprints.preemption`: null (the default) or the blueprint's
 *   preemption settings `{priorityMargin, minRuntimeMs, graceMs}`
 *   (domain/preemption.ts).
 * - `leases.preemptible`: false for a lease created not to be preempted.
 * - `preemptions`: the blueprint's preemptions under way: the victim, the
 *   waiting lease it is preempted for, the resource whose slot that lease
 *   gets, when the victim's grace period ends, and why it was chosen.
 *   Written only by the blueprint's drain (and by a change of its settings,
 *   under its lock); a row goes when the preempting lease gets the slot or
 *   the preemption is withdrawn.
 *
 * Expand only: a worker of the release before neither reads nor writes
 * them, and preempts nothing (docs/upgrades.md).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table blueprints add column preemption jsonb;
    alter table leases add column preemptible boolean not null default true;
    create table preemptions (
      victim_lease_id bigint primary key references leases (id) on delete cascade,
      blueprint_id bigint not null references blueprints (id) on delete cascade,
      for_lease_id bigint not null references leases (id) on delete cascade,
      resource_id bigint not null references resources (id) on delete cascade,
      created_at timestamptz not null default now(),
      ends_by timestamptz not null,
      reason text not null
    );
    create index preemptions_by_blueprint on preemptions (blueprint_id);
    create index preemptions_by_for_lease on preemptions (for_lease_id);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop table preemptions;
    alter table leases drop column preemptible;
    alter table blueprints drop column preemption;
  `.execute(db);
}
