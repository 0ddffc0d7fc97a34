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
