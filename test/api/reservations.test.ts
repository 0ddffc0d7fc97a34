import { expect, test } from 'vitest';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, preemptingSlot, simulatedBlueprint, waitingLease } from './support/fixtures.ts';
import { NO_SCHEDULED_COLLECTOR } from '../cli/rowCounts.ts';

/**
 * Advance reservations through the API, with a real worker (decision
 * 0045): made, refused when the blueprint cannot hold them, listed, shown
 * and cancelled; during the window their slots are held back from other
 * leases, and the leases that name them are served from them first.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

const leaseOf = async (id: number) => (await env.as.admin.get(`/v1/leases/${id}`)).body.lease;
const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();
const HOUR = 3_600_000;

/** A simulated blueprint of `slots` one-slot resources. */
const pool = async (slots: number) => (await simulatedBlueprint(env.as.admin, {}, { maxResources: slots, leasesPerResource: 1 })).name;

const reserve = (body: Record<string, unknown>) => env.as.admin.post('/v1/reservations', { from: inMs(0), to: inMs(HOUR), ...body });

test('a reservation is made, listed, shown and cancelled, each change recorded with who made it', async () => {
  const name = await pool(3);
  const made = await reserve({ blueprint: name, slots: 2, from: inMs(HOUR), to: inMs(2 * HOUR), reason: 'release night' });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  expect(made.headers.get('location')).toBe(`/v1/reservations/${made.body.id}`);
  expect(made.body).toMatchObject({ blueprintName: name, slots: 2, state: 'upcoming', team: null, holders: null, createdBy: 'token:admin' });
  expect(made.body.reason).toBe('release night');

  const listed = await env.as.viewer.get(`/v1/reservations?blueprint=${name}`);
  expect(listed.body.items.map((r: { id: number }) => r.id)).toEqual([made.body.id]);
  expect((await env.as.viewer.get(`/v1/reservations?blueprint=${name}&state=active`)).body.items).toEqual([]);
  expect((await env.as.viewer.get(`/v1/reservations/${made.body.id}`)).body.id).toBe(made.body.id);

  // The window's start and end are queued on the blueprint for then.
  const queue = (await env.as.viewer.get(`/v1/blueprints/${name}`)).body.queue as Array<{
    kind: string;
    notBefore: string;
    payload: { moment: string };
  }>;
  const due = (moment: string) => queue.find((c) => c.kind === 'reservation_due' && c.payload.moment === moment)?.notBefore;
  expect(due('start')).toBe(made.body.from);
  expect(due('end')).toBe(made.body.to);

  // Only those who may change blueprints make or cancel one.
  expect((await env.as.user.post('/v1/reservations', { blueprint: name, slots: 1, from: inMs(0), to: inMs(HOUR) })).status).toBe(403);

  const cancelled = await env.as.admin.post(`/v1/reservations/${made.body.id}/cancel`, { reason: 'moved' });
  expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
  expect(cancelled.body).toMatchObject({ state: 'cancelled', cancelledBy: 'token:admin', cancelledSource: 'api', cancelReason: 'moved' });
  const again = await env.as.admin.post(`/v1/reservations/${made.body.id}/cancel`, {});
  expect(again.status).toBe(409);
  expect(again.body.message).toMatch(/was cancelled at .* by token:admin: there is nothing to cancel/);

  const timeline = (await env.as.viewer.get(`/v1/blueprints/${name}`)).body.timeline.entries as Array<{ event?: string; message: string }>;
  const types = timeline.map((e) => e.event);
  expect(types).toContain('reservation_created');
  expect(types).toContain('reservation_cancelled');
  expect(timeline.find((e) => e.event === 'reservation_cancelled')?.message).toMatch(/^reservation \d+ cancelled \(2 slot\(s\) from .*\): moved$/);
  // Cancelled, the moments of its window queued on the blueprint are too.
  const after = (await env.as.viewer.get(`/v1/blueprints/${name}`)).body.queue as Array<{ kind: string }>;
  expect(after.filter((c) => c.kind === 'reservation_due')).toEqual([]);
});

test('a reservation the blueprint cannot hold beside those overlapping it is refused at once, saying how many could be, with nothing written', async () => {
  const name = await pool(3);
  expect((await reserve({ blueprint: name, slots: 2, from: inMs(HOUR), to: inMs(3 * HOUR) })).status).toBe(201);
  const refused = await reserve({ blueprint: name, slots: 2, from: inMs(2 * HOUR), to: inMs(4 * HOUR) });
  expect(refused.status).toBe(409);
  expect(refused.body.message).toMatch(
    new RegExp(
      `blueprint ${name} cannot hold 2 slot\\(s\\) .*: it has 3 \\(max resources 3 × 1 lease\\(s\\) each\\); reservation\\(s\\) \\d+ hold 2 of them at once in that window, so 1 can be reserved`,
    ),
  );
  expect(refused.body.details).toMatchObject({ capacity: 3, reserved: 2, available: 1 });
  expect((await env.as.viewer.get(`/v1/reservations?blueprint=${name}`)).body.items).toHaveLength(1);
  // One that fits, and one in a window the first does not overlap, are made.
  expect((await reserve({ blueprint: name, slots: 1, from: inMs(2 * HOUR), to: inMs(4 * HOUR) })).status).toBe(201);
  expect((await reserve({ blueprint: name, slots: 3, from: inMs(5 * HOUR), to: inMs(6 * HOUR) })).status).toBe(201);
  expect((await reserve({ blueprint: name, slots: 4, from: inMs(5 * HOUR), to: inMs(6 * HOUR) })).status).toBe(409);
});

test("during its window a reservation's slots are held back from other leases; a lease that names it is served from them", async () => {
  const name = await pool(2);
  const { body: reservation } = await reserve({ blueprint: name, slots: 1 });
  expect(reservation.state).toBe('active');
  const first = await activeLease(env.as.user, name);
  // One slot is left, and the reservation holds it back.
  const other = await waitingLease(env.as.user, name);
  const standing = await waitFor(
    'the other lease to say why it waits',
    async () => (await env.as.viewer.get(`/v1/leases/${other.id}`)).body.line ?? undefined,
  );
  expect(JSON.stringify(standing)).toMatch(new RegExp(`1 slot\\(s\\) held for reservation\\(s\\) ${reservation.id}`));
  const reserved = await activeLease(env.as.user, name, { reservation: reservation.id });
  expect(reserved.reservationId).toBe(reservation.id);
  expect((await env.as.viewer.get(`/v1/reservations/${reservation.id}`)).body).toMatchObject({ holding: 1, waiting: 0 });
  // Given back, the reservation's slot is held again: the other lease still waits.
  await env.as.user.post(`/v1/leases/${reserved.id}/commands?wait=30`, { kind: 'release' });
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect((await leaseOf(other.id)).state).toBe('pending');
  // Cancelled, the reservation holds nothing back.
  expect((await env.as.admin.post(`/v1/reservations/${reservation.id}/cancel`, {})).status).toBe(200);
  await waitFor('the other lease to be active', async () => (await leaseOf(other.id)).state === 'active');
  await env.as.user.post(`/v1/leases/${first.id}/commands?wait=30`, { kind: 'release' });
});

test("a lease that names the reservation is served ahead of the line, and at the window's end the line gets the slots", async () => {
  const name = await pool(1);
  const holder = await activeLease(env.as.user, name);
  const { body: reservation } = await reserve({ blueprint: name, slots: 1, to: inMs(4000) });
  const earlier = await waitingLease(env.as.user, name);
  const named = await waitingLease(env.as.user, name, { reservation: reservation.id });
  await waitFor(
    'the lease to wait for the reservation',
    async () => (await env.as.viewer.get(`/v1/reservations/${reservation.id}`)).body.waiting === 1,
  );
  await env.as.user.post(`/v1/leases/${holder.id}/commands?wait=30`, { kind: 'release' });
  await waitFor('the lease that names the reservation to be active', async () => (await leaseOf(named.id)).state === 'active');
  const detail = (await env.as.viewer.get(`/v1/leases/${named.id}`)).body;
  expect(JSON.stringify(detail)).toMatch(new RegExp(`lease ${named.id} chosen for a slot: from reservation ${reservation.id}, ahead of the line`));
  expect((await leaseOf(earlier.id)).state).toBe('pending');
  await env.as.user.post(`/v1/leases/${named.id}/commands?wait=30`, { kind: 'release' });
  // Its slot is held for the reservation until the window ends; then the earlier lease gets it.
  expect((await leaseOf(earlier.id)).state).toBe('pending');
  await waitFor('the earlier lease to be active once the window ended', async () => (await leaseOf(earlier.id)).state === 'active', 15_000);
  expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(reservation.to));
  await env.as.user.post(`/v1/leases/${earlier.id}/commands?wait=30`, { kind: 'release' });
});

test('a lease naming a reservation it may not use is refused at once, saying why, with nothing made', async () => {
  const name = await pool(2);
  expect((await env.as.admin.post('/v1/teams/qa', {})).status).toBe(200);
  const forQa = (await reserve({ blueprint: name, slots: 1, team: 'qa' })).body;
  const forBot = (await reserve({ blueprint: name, slots: 1, holders: ['token:bot'], from: inMs(2 * HOUR), to: inMs(3 * HOUR) })).body;
  const later = (await reserve({ blueprint: name, slots: 1, from: inMs(HOUR), to: inMs(2 * HOUR) })).body;
  const other = await pool(1);
  const cases: Array<[Record<string, unknown>, number, RegExp]> = [
    [{ reservation: forQa.id }, 409, new RegExp(`may not use reservation ${forQa.id}: it is for team qa, and this lease would be team default's`)],
    [{ reservation: later.id }, 409, new RegExp(`may not use reservation ${later.id}: its window starts at .*: name it from then`)],
    [{ reservation: forQa.id, blueprint: other }, 409, new RegExp(`it is at blueprint ${name}: name that blueprint, or leave the blueprint out`)],
    [{ reservation: 999_999 }, 404, /reservation 999999 does not exist: list them with `slipway reservation list`/],
  ];
  const before = (await env.as.viewer.get('/v1/leases?limit=1000')).body.items.length;
  for (const [body, status, says] of cases) {
    const answer = await env.as.user.post('/v1/leases', { ...body });
    expect(answer.status, JSON.stringify(body)).toBe(status);
    expect(answer.body.message).toMatch(says);
  }
  expect((await env.as.admin.post(`/v1/reservations/${forBot.id}/cancel`, {})).status).toBe(200);
  const cancelled = await env.as.user.post('/v1/leases', { reservation: forBot.id });
  expect(cancelled.status).toBe(409);
  expect(cancelled.body.message).toMatch(/it was cancelled at .*: request the lease without it/);
  expect((await env.as.viewer.get('/v1/leases?limit=1000')).body.items.length).toBe(before);
});

test('the OpenAPI document has the reservation operations', async () => {
  const doc = (await env.as.viewer.get('/v1/openapi.json')).body;
  expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/reservations', '/v1/reservations/{id}', '/v1/reservations/{id}/cancel']));
  expect(doc.paths['/v1/leases'].post.requestBody.content['application/json'].schema.properties.reservation).toBeDefined();
});

test("the slots a reservation's leases do not use are handed back to the line at the time it was given, and the timeline says so", async () => {
  const name = await pool(2);
  const { body: reservation } = await reserve({ blueprint: name, slots: 1, handBackAfterMs: 2000 });
  expect(reservation.handBackAfterMs).toBe(2000);
  const first = await activeLease(env.as.user, name);
  const other = await waitingLease(env.as.user, name);
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect((await leaseOf(other.id)).state).toBe('pending');
  await waitFor(
    'the other lease to be active once the unused slot was handed back',
    async () => (await leaseOf(other.id)).state === 'active',
    15_000,
  );
  expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(reservation.from) + 2000);
  const timeline = (await env.as.viewer.get(`/v1/blueprints/${name}`)).body.timeline.entries as Array<{ event?: string; message: string }>;
  expect(timeline.find((e) => e.event === 'reservation_hand_back')?.message).toBe(
    `reservation ${reservation.id}: the slots its leases do not use are handed back to the line`,
  );
  for (const lease of [first, other]) await env.as.user.post(`/v1/leases/${lease.id}/commands?wait=30`, { kind: 'release' });
});

test("a reservation's leases end at its window's end: told ahead as for a time limit, and released then, waiting or not", async () => {
  const name = await pool(1);
  const { body: reservation } = await reserve({ blueprint: name, slots: 1, to: inMs(5000) });
  const holding = await activeLease(env.as.user, name, { reservation: reservation.id });
  expect(holding.endBy).toBe(reservation.to);
  const detail = (await env.as.viewer.get(`/v1/leases/${holding.id}`)).body;
  expect(JSON.stringify(detail)).toContain(
    `ends by ${reservation.to.replace('T', ' ')} at the latest (the end of reservation ${reservation.id}'s window)`,
  );
  // A second lease of it finds its one slot used: it waits, and ends with the window too.
  const waiting = await waitingLease(env.as.user, name, { reservation: reservation.id });
  const ending = await waitFor('the holder to be told', async () => (await leaseOf(holding.id)).ending ?? undefined, 15_000);
  expect(ending).toEqual({ kind: 'reservation_end', at: reservation.to, reason: `reached the end of reservation ${reservation.id}'s window` });
  await waitFor(
    'both leases to be released',
    async () => (await leaseOf(holding.id)).state === 'destroyed' && (await leaseOf(waiting.id)).state === 'destroyed',
    15_000,
  );
  for (const lease of [holding, waiting]) {
    const commands = (await env.as.viewer.get(`/v1/commands?target=lease:${lease.id}&kind=release`)).body.items;
    expect(commands[0]).toMatchObject({ issuedBy: 'system:deadline', reason: `reached the end of reservation ${reservation.id}'s window` });
  }
});

test('before its window, a reservation holds its slots back from leases that could still hold them when it opens; leases whose time limit ends them sooner are served (backfill)', async () => {
  const hold = 60_000;
  const limited = (await simulatedBlueprint(env.as.admin, {}, { maxResources: 2, leasesPerResource: 1 }, { maxHoldMs: hold })).name;
  // A window that opens after a lease granted now must have ended: it holds nothing back yet.
  await reserve({ blueprint: limited, slots: 1, from: inMs(2 * hold), to: inMs(HOUR) });
  const backfilled = [await activeLease(env.as.user, limited), await activeLease(env.as.user, limited)];
  for (const lease of backfilled) await env.as.user.post(`/v1/leases/${lease.id}/commands?wait=30`, { kind: 'release' });
  // One that opens before a lease granted now would end holds its slot back already.
  const { body: soon } = await reserve({ blueprint: limited, slots: 1, from: inMs(hold / 2), to: inMs(HOUR) });
  const first = await activeLease(env.as.user, limited);
  const other = await waitingLease(env.as.user, limited);
  await waitFor('the other lease to say why it waits', async () =>
    JSON.stringify((await env.as.viewer.get(`/v1/leases/${other.id}`)).body.line ?? '').includes(
      `1 slot(s) held for reservation(s) ${soon.id} (from `,
    ),
  );
  // With no time limit, any reservation to come holds its slots back.
  const unlimited = await pool(2);
  await reserve({ blueprint: unlimited, slots: 1, from: inMs(HOUR), to: inMs(2 * HOUR) });
  const holding = await activeLease(env.as.user, unlimited);
  const held = await waitingLease(env.as.user, unlimited);
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect((await leaseOf(held.id)).state).toBe('pending');
  for (const lease of [first, other, holding, held]) await env.as.user.post(`/v1/leases/${lease.id}/commands?wait=30`, { kind: 'release' });
});

test("at its window's start, a reservation's slots are reclaimed from other leases after the blueprint's grace period; cancelled, what it reclaimed is withdrawn", async () => {
  const quick = await preemptingSlot(env.as.admin, { priorityMargin: 9, graceMs: 1000 });
  const victim = await activeLease(env.as.user, quick);
  const { body: reservation } = await reserve({ blueprint: quick, slots: 1, from: inMs(1500), to: inMs(HOUR) });
  const other = await waitingLease(env.as.user, quick);
  const ending = await waitFor('the victim to be told', async () => (await leaseOf(victim.id)).ending ?? undefined, 15_000);
  expect(ending).toMatchObject({
    kind: 'reclaimed',
    reason: `reclaimed for reservation(s) ${reservation.id} at blueprint ${quick}, whose window is open`,
  });
  await waitFor('the victim to end', async () => (await leaseOf(victim.id)).state === 'destroyed', 15_000);
  const release = (await env.as.viewer.get(`/v1/commands?target=lease:${victim.id}&kind=release`)).body.items[0];
  expect(release.issuedBy).toBe('system:preemption');
  // Its slot is held for the reservation: the other lease waits, and a lease of the reservation has it.
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect((await leaseOf(other.id)).state).toBe('pending');
  const reserved = await activeLease(env.as.user, quick, { reservation: reservation.id });
  expect(reserved.resourceId).toBe(victim.resourceId);
  for (const lease of [reserved, other]) await env.as.user.post(`/v1/leases/${lease.id}/commands?wait=30`, { kind: 'release' });

  const slow = await preemptingSlot(env.as.admin, { priorityMargin: 9, graceMs: 600_000 });
  const kept = await activeLease(env.as.user, slow);
  const { body: withdrawn } = await reserve({ blueprint: slow, slots: 1, from: inMs(1000), to: inMs(HOUR) });
  await waitFor('the lease to be told', async () => (await leaseOf(kept.id)).ending?.kind === 'reclaimed', 15_000);
  expect((await env.as.admin.post(`/v1/reservations/${withdrawn.id}/cancel`, {})).status).toBe(200);
  await waitFor('the reclaim to be withdrawn', async () => (await leaseOf(kept.id)).ending === null, 15_000);
  expect((await leaseOf(kept.id)).state).toBe('active');
  await env.as.user.post(`/v1/leases/${kept.id}/commands?wait=30`, { kind: 'release' });
});
