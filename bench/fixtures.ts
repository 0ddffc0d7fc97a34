import { sql } from 'kysely';
import type { Db } from '../src/db/Database.ts';
import type { Actor } from '../src/domain/Actor.ts';
import { createBlueprint } from '../src/objects/createBlueprint.ts';
import { createLease } from '../src/objects/createLease.ts';
import { allQueuesEmpty } from './commandCounts.ts';
import { pollUntil, runClients } from './measure.ts';

/** Slots per resource of a blueprint made by createActiveLeases. */
const LEASES_PER_RESOURCE = 100;
const SETUP_TIMEOUT_MS = 5 * 60_000;

export const BENCH_ACTOR: Actor = { issuedBy: 'bench', source: 'cli', reason: 'benchmark' };

/**
 * A blueprint on the `simulated` driver at zero latency, so the figures
 * measure Slipway and PostgreSQL rather than any infrastructure.
 */
export async function createSimulatedBlueprint(
  db: Db,
  name: string,
  limits: { maxResources: number; leasesPerResource: number },
): Promise<number> {
  const blueprint = await createBlueprint(
    db,
    { name, driver: 'simulated', settings: { latencyMs: { min: 0, max: 0 } }, ...limits },
    BENCH_ACTOR,
  );
  return blueprint.id;
}

/** Creates `count` leases on the blueprint through the ordinary path, from `clients` connections; returns their ids. */
export async function createLeases(db: Db, blueprintId: number, count: number, clients: number): Promise<number[]> {
  const ids: number[] = new Array(count);
  await runClients(clients, count, async (n) => {
    const { lease } = await createLease(db, { blueprint: blueprintId, holder: `bench-${n}` }, BENCH_ACTOR);
    ids[n] = lease.id;
  });
  return ids;
}

/**
 * `count` leases on a new blueprint, taken all the way to active by the
 * running workers; returns once the system is quiet again.
 *
 * A lease that finds no free slot queues at its blueprint, which makes one
 * capacity decision at a time. So one seed lease per resource goes first (the
 * blueprint makes a resource for each), and the rest, created once those are
 * active, find free slots and go straight to a resource.
 */
export async function createActiveLeases(db: Db, blueprintName: string, count: number, clients: number): Promise<number[]> {
  // Room for twice the leases, so few acquires meet a full resource and retry.
  const resources = 2 * Math.ceil(count / LEASES_PER_RESOURCE);
  const blueprintId = await createSimulatedBlueprint(db, blueprintName, { maxResources: resources, leasesPerResource: LEASES_PER_RESOURCE });
  const seeds = await createLeases(db, blueprintId, Math.min(resources, count), clients);
  await untilActive(db, blueprintId, seeds.length);
  const rest = await createLeases(db, blueprintId, count - seeds.length, clients);
  await untilActive(db, blueprintId, count);
  return [...seeds, ...rest];
}

async function untilActive(db: Db, blueprintId: number, count: number): Promise<void> {
  const allActive = async () => {
    const { n } = await db
      .selectFrom('leases')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('blueprint_id', '=', blueprintId)
      .where('state', '=', 'active')
      .executeTakeFirstOrThrow();
    return n === count && (await allQueuesEmpty(db));
  };
  await pollUntil(`${count} leases to become active`, allActive, SETUP_TIMEOUT_MS, 250);
}
