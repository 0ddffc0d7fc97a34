import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { NO_SCHEDULED_COLLECTOR } from '../cli/rowCounts.ts';
import { byLabels, parsePromText, type Scraped } from '../helpers/promText.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, preemptingSlot, waitingLease } from './support/fixtures.ts';

/**
 * Preemption's metrics (docs/metrics.md) on a real server and worker: a
 * preemption made, one withdrawn, a victim ended at its grace period's end
 * and one released by its holder first, each counted under its blueprint,
 * and the counts the same as the events the drain committed.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

async function scrape(): Promise<Scraped> {
  const answer = await fetch(`${env.anonymous.baseUrl}/metrics`);
  expect(answer.status).toBe(200);
  return parsePromText(await answer.text());
}

const onePreemptingSlot = (name: string, graceMs: number) => preemptingSlot(env.as.admin, { priorityMargin: 1, graceMs }, { name });

const leaseOf = async (id: number) => (await env.as.admin.get(`/v1/leases/${id}`)).body.lease;

const active = (blueprint: string, priority: number) => activeLease(env.as.user, blueprint, { priority });
const waiting = (blueprint: string, priority: number) => waitingLease(env.as.user, blueprint, { priority });

const release = async (id: number) => expect((await env.as.user.post(`/v1/leases/${id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);

/** Both records with their keys in order, to compare as text. */
const sorted = (counted: Record<string, Record<string, number>>) =>
  Object.fromEntries(Object.entries(counted).map(([name, counts]) => [name, Object.fromEntries(Object.entries(counts).sort())]));

const told = (id: number) => waitFor(`lease ${id} to be told it is preempted`, async () => (await leaseOf(id)).ending?.kind === 'preempted');

test('preemptions made and withdrawn, and how their victims ended, are counted by blueprint as the drain committed them', async () => {
  // Ended by its grace period: made, then the victim released as system:preemption.
  await onePreemptingSlot('graced', 1000);
  await active('graced', 1);
  const urgent = await waiting('graced', 4);
  await waitFor('the urgent lease to be active', async () => (await leaseOf(urgent.id)).state === 'active');
  await release(urgent.id);

  // Withdrawn (the urgent lease left), made again, and ended by its holder.
  await onePreemptingSlot('released', 600_000);
  const victim = await active('released', 1);
  const left = await waiting('released', 4);
  await told(victim.id);
  await release(left.id);
  await waitFor('the victim to be told it stays', async () => (await leaseOf(victim.id)).ending === null);
  const second = await waiting('released', 4);
  await told(victim.id);
  await release(victim.id);
  await waitFor('the second urgent lease to be active', async () => (await leaseOf(second.id)).state === 'active');
  await release(second.id);

  const expected = {
    preemptions: { 'graced,made': 1, 'released,made': 2, 'released,withdrawn': 1 },
    endings: { 'graced,preempted,system:preemption': 1, 'released,preempted,holder': 1 },
  };
  // Counters are bumped just after their commits, so they are waited for, not read once.
  const scraped = await waitFor('the preemption counters', async () => {
    const now = await scrape();
    const counted = {
      preemptions: byLabels(now, 'slipway_preemptions_total', ['blueprint', 'event']),
      endings: byLabels(now, 'slipway_lease_endings_total', ['blueprint', 'kind', 'ended_by']),
    };
    return JSON.stringify(sorted(counted)) === JSON.stringify(sorted(expected)) && now;
  });
  expect(scraped.families.get('slipway_preemptions_total')?.type).toBe('counter');

  // The same as the blueprints' events, which the same commits recorded.
  const { rows } = await sql<{ name: string; type: string; n: number }>`
    select b.name, e.type, count(*)::int as n from events e join blueprints b on b.id = e.target_id
    where e.target_kind = 'blueprint' and e.type in ('preempting', 'preemption_withdrawn', 'preemption_taken_over')
    group by 1, 2`.execute(env.database.db);
  const event = { preempting: 'made', preemption_withdrawn: 'withdrawn', preemption_taken_over: 'taken_over' } as Record<string, string>;
  expect(Object.fromEntries(rows.map((r) => [`${r.name},${event[r.type]}`, r.n]))).toEqual(expected.preemptions);
});
