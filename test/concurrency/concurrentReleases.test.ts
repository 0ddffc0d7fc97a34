import { expect, test } from 'vitest';
import type { CommandSource } from '../../migrations/schema.ts';
import type { Actor } from '../../src/domain/Actor.ts';
import { CommandRejectedError } from '../../src/domain/errors.ts';
import { appendCommand, type AppendResult } from '../../src/queue/appendCommand.ts';
import { stateTrails, trailsOtherThan } from './support/eventLog.ts';
import { createLeases, shuffle, simulatedBlueprint, waitForLeases, waitForQuietQueues } from './support/fixtures.ts';
import { clusterForThisFile } from './support/testCluster.ts';

/**
 * The race that started it all: many callers, from every kind of source,
 * release the same leases at once while several workers drain with random
 * delays. Each lease must be released exactly once, every caller must get
 * either that one release or a clear refusal, and the event log must tell
 * one unbroken story per object.
 */
const LEASES = 100;
const RELEASES_PER_LEASE = 50;
const SOURCES: readonly CommandSource[] = ['cli', 'api', 'web', 'gc', 'system'];

const cluster = clusterForThisFile({ workers: 4, poolSize: 25, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '10', SLIPWAY_WORKER_CONCURRENCY: '2' } });

const callerOf = (leaseId: number, n: number): Actor => {
  const source = SOURCES[n % SOURCES.length]!;
  return { issuedBy: `${source}-caller-${n}`, source, reason: 'concurrency test', requestId: `release-${leaseId}-${n}` };
};

interface Answers {
  started: AppendResult[];
  coalesced: AppendResult[];
  refused: CommandRejectedError[];
}

test(`${RELEASES_PER_LEASE} concurrent releases of each of ${LEASES} active leases release each exactly once`, async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'race', { maxResources: 25, leasesPerResource: 4 }, { latencyMs: { min: 0, max: 20 } });
  const leaseIds = (await createLeases(db, blueprint, LEASES)).map((l) => l.id);
  await waitForLeases(db, leaseIds, ['active']);

  const requests = shuffle(leaseIds.flatMap((id) => Array.from({ length: RELEASES_PER_LEASE }, (_, n) => ({ id, actor: callerOf(id, n) }))));
  const settled = await Promise.allSettled(
    requests.map(({ id, actor }) => appendCommand(db, { target: { kind: 'lease', id }, kind: 'release', actor })),
  );

  const answers = new Map<number, Answers>(leaseIds.map((id) => [id, { started: [], coalesced: [], refused: [] }]));
  settled.forEach((result, i) => {
    const answer = answers.get(requests[i]!.id)!;
    if (result.status === 'rejected') {
      if (!(result.reason instanceof CommandRejectedError)) throw result.reason;
      answer.refused.push(result.reason);
    } else (result.value.coalesced ? answer.coalesced : answer.started).push(result.value);
  });

  await waitForLeases(db, leaseIds, ['destroyed']);
  await waitForQuietQueues(db);

  const effects = await db.selectFrom('simulated_effects').selectAll().where('operation', '=', 'releaseLease').execute();
  for (const [leaseId, { started, coalesced, refused }] of answers) {
    // Exactly one caller's release went on the queue; everyone else joined it or was told it is done.
    expect(
      started.map((s) => s.command.kind),
      `lease ${leaseId}`,
    ).toEqual(['release']);
    const release = started[0]!.command;
    expect(coalesced.length + refused.length).toBe(RELEASES_PER_LEASE - 1);
    for (const c of coalesced) expect(c.command.id).toBe(release.id);
    for (const error of refused) {
      expect(['released', 'destroyed']).toContain(error.details.state);
      expect(error.message).toContain(`lease ${leaseId} is ${String(error.details.state)}`);
      expect(error.details.settledBy).toBe(release.id);
    }
    // The driver released it once, for that command, and no call was repeated.
    const effect = effects.filter((e) => e.object_id === leaseId);
    expect(effect.map((e) => [e.idempotency_key, e.calls])).toEqual([[`lease:${leaseId}:${release.id}`, 1]]);
  }

  const unfinished = await db
    .selectFrom('commands')
    .select(['id', 'target_kind', 'target_id', 'kind', 'status', 'message'])
    .where('status', 'not in', ['done', 'coalesced'])
    .execute();
  expect(unfinished).toEqual([]);

  const leaseTrails = await stateTrails(db, 'lease');
  expect(leaseTrails.size).toBe(LEASES);
  expect(trailsOtherThan(leaseTrails, ['pending', 'acquired', 'active', 'released', 'destroyed'])).toEqual([]);
  // Nobody released a resource: each was made, became active, and stayed so.
  expect(trailsOtherThan(await stateTrails(db, 'resource'), ['pending', 'active'])).toEqual([]);
  // Every slot came back once (each lease deletes its own slot row, its step's returns in one statement): no slot
  // row is left, and each freed each of its slots once. The resources heard only of what may have been their last
  // slot, from whichever of their leases, released at once, gave it back last: each counted none, and is idle.
  const resources = await db.selectFrom('resources').select(['id', 'used_slots', 'idle_since']).where('blueprint_id', '=', blueprint.id).execute();
  expect(resources.filter((r) => r.used_slots !== 0 || r.idle_since === null)).toEqual([]);
  const resourceIds = resources.map((r) => r.id);
  expect(await db.selectFrom('resource_slots').select('lease_id').where('resource_id', 'in', resourceIds).execute()).toEqual([]);
  const freed = await db.selectFrom('events').select('data').where('target_kind', '=', 'resource').where('type', '=', 'slot_freed').execute();
  expect(freed.map((e) => (e.data as { leaseId: number }).leaseId).sort((a, b) => a - b)).toEqual([...leaseIds].sort((a, b) => a - b));
  expect(cluster.workers.errors()).toEqual([]);

  const refusals = [...answers.values()].reduce((n, a) => n + a.refused.length, 0);
  console.info(`releases: ${LEASES} started, ${LEASES * (RELEASES_PER_LEASE - 1) - refusals} coalesced, ${refusals} refused`);
}, 240_000);
