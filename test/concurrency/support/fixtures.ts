import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { BlueprintRow, LeaseRow } from '../../../migrations/schema.ts';
import type { Db } from '../../../src/db/Database.ts';
import type { Actor } from '../../../src/domain/Actor.ts';
import { createBlueprint } from '../../../src/objects/createBlueprint.ts';
import { createLease } from '../../../src/objects/createLease.ts';
import { appendCommand, type AppendResult } from '../../../src/queue/appendCommand.ts';
import { waitFor } from '../../helpers/waitFor.ts';

export const tester: Actor = { issuedBy: 'tester', source: 'cli' };

/** A `simulated` blueprint; `settings` are the driver's (latency, failures). */
export function simulatedBlueprint(
  db: Db,
  name: string,
  limits: { maxResources: number; leasesPerResource: number },
  settings: Record<string, unknown> = {},
): Promise<BlueprintRow> {
  return createBlueprint(db, { name, driver: 'simulated', settings, ...limits }, tester);
}

export async function createLeases(db: Db, blueprint: BlueprintRow, count: number): Promise<LeaseRow[]> {
  const created = await Promise.all(
    Array.from({ length: count }, (_, i) => createLease(db, { blueprint: blueprint.name, holder: `holder-${i}` }, tester)),
  );
  return created.map((c) => c.lease);
}

/** Asks for a lease's release, as its holder would from the CLI. */
export function releaseLease(db: Db, leaseId: number): Promise<AppendResult> {
  return appendCommand(db, { target: { kind: 'lease', id: leaseId }, kind: 'release', actor: tester });
}

/** Asks a resource or blueprint for `kind`, as an operator would from the CLI (`reason` recorded, if given). */
export function askFor(
  db: Db,
  target: { kind: 'resource' | 'blueprint'; id: number },
  kind: string,
  payload?: unknown,
  reason?: string,
): Promise<AppendResult> {
  return appendCommand(db, { target, kind, payload, actor: { ...tester, reason } });
}

/** Waits until every lease in `ids` is in one of `states`. */
export async function waitForLeases(db: Db, ids: readonly number[], states: readonly string[], timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `${ids.length} lease(s) to be ${states.join(' or ')}`,
    async () => {
      const rows = await db
        .selectFrom('leases')
        .select('state')
        .where('id', 'in', [...ids])
        .execute();
      return rows.length === ids.length && rows.every((r) => states.includes(r.state));
    },
    timeoutMs,
  );
}

/** Waits until no command anywhere is queued or running. */
export async function waitForQuietQueues(db: Db, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    'every queue to drain',
    async () => {
      const row = await db
        .selectFrom('commands')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', 'in', ['queued', 'running'])
        .executeTakeFirstOrThrow();
      return Number(row.n) === 0;
    },
    timeoutMs,
  );
}

/** Fisher–Yates, in place. */
export function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** The leases of `ids` in the order their blueprint first sent each to a resource (its acquire). */
export async function serveOrder(db: Db, ids: readonly number[]): Promise<number[]> {
  const acquires = await db
    .selectFrom('commands')
    .select(['id', 'payload'])
    .where('target_kind', '=', 'resource')
    .where('kind', '=', 'acquire')
    .orderBy('id')
    .execute();
  const wanted = new Set(ids);
  const order: number[] = [];
  for (const { payload } of acquires) {
    const leaseId = (payload as { leaseId: number }).leaseId;
    if (wanted.has(leaseId) && !order.includes(leaseId)) order.push(leaseId);
  }
  return order;
}

/**
 * Releases each lease of `ids()` once it is active, after `holdMs()`, as a
 * holder done with it would, until `until()` and all of them are destroyed.
 */
export async function holdAndRelease(
  db: Db,
  ids: () => readonly number[],
  holdMs: () => number,
  until: () => boolean = () => true,
  timeoutMs = 180_000,
): Promise<void> {
  const released = new Set<number>();
  await waitFor(
    'every lease served and destroyed',
    async () => {
      const wanted = ids();
      const rows =
        wanted.length === 0
          ? []
          : await db
              .selectFrom('leases')
              .select(['id', 'state'])
              .where('id', 'in', [...wanted])
              .execute();
      for (const lease of rows.filter((l) => l.state === 'active' && !released.has(l.id))) {
        released.add(lease.id);
        setTimeout(() => void releaseLease(db, lease.id), holdMs());
      }
      return until() && rows.length === wanted.length && rows.every((l) => l.state === 'destroyed');
    },
    timeoutMs,
  );
}

/**
 * Pending leases now, by team, at any blueprint: `inLine`, those with a row
 * in a blueprint's waiting line (what a decision weighs), and `pending`, all
 * of them (also those on their way to the line, and those sent to a
 * resource).
 */
export async function waitingByTeam(db: Db): Promise<Map<string, { inLine: number; pending: number }>> {
  const { rows } = await sql<{ team: string; in_line: number; pending: number }>`
    select l.team, count(w.lease_id)::int as in_line, count(*)::int as pending
    from leases l left join blueprint_waiters w on w.lease_id = l.id
    where l.state = 'pending'
    group by l.team
  `.execute(db);
  return new Map(rows.map((r) => [r.team, { inLine: r.in_line, pending: r.pending }]));
}

/**
 * Keeps 8 leases of `team` in `blueprint`'s line until `done`, adding the
 * ones it requests to `leases` (and telling `created` of each, as soon as
 * its request is made). A team whose line runs dry for a moment
 * loses the slot freed then to the others, which hold it for a whole hold:
 * so the line is counted by its rows, not by pending leases (some of those
 * are still on their way to it, or already sent to a resource), and a
 * shortfall is made up at once, by requests sent together. At most 24
 * pending, so a slow way to the line cannot grow the flood without end.
 */
export async function keepInLine(
  db: Db,
  blueprint: string,
  team: string,
  leases: LeaseRow[],
  done: () => boolean,
  created: (lease: LeaseRow) => unknown = () => undefined,
): Promise<void> {
  while (!done()) {
    const { inLine, pending } = (await waitingByTeam(db)).get(team) ?? { inLine: 0, pending: 0 };
    const more = Math.min(8 - inLine, 24 - pending);
    if (more > 0)
      await Promise.all(
        Array.from({ length: more }, async () => {
          const { lease } = await createLease(db, { blueprint, holder: team, team }, tester);
          leases.push(lease);
          await created(lease);
        }),
      );
    else await sleep(20);
  }
}
