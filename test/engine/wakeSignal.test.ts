import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { namedObjects, signalWorkers } from '../../src/queue/wakeSignal.ts';
import { WAKE_CHANNEL } from '../../src/db/channels.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let listener: pg.Client;
const heard: number[] = [];
const payloads: string[] = [];

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 4 });
  listener = new pg.Client({ connectionString: database.url });
  await listener.connect();
  listener.on('notification', (n) => {
    if (n.channel !== WAKE_CHANNEL) return;
    heard.push(Date.now());
    payloads.push(n.payload ?? '');
  });
  await listener.query(`listen ${WAKE_CHANNEL}`);
});
afterAll(async () => {
  await listener?.end();
  await database?.drop();
});

test('signals asked for together share one NOTIFY, and each caller is answered by one sent after it asked', async () => {
  // The first goes out at once; the other 49 come while it is in flight, so
  // it may have left before their commits: they share the next one.
  await Promise.all(Array.from({ length: 50 }, () => signalWorkers(database.db)));
  await waitFor('both signals to be heard', async () => heard.length >= 2);
  expect(heard).toHaveLength(2);

  // A caller after that, alone, gets a signal of its own.
  await signalWorkers(database.db);
  await waitFor('the third signal to be heard', async () => heard.length >= 3);
  expect(heard).toHaveLength(3);
});

test('a signal names the objects its callers woke, up to 32, and the next one only those asked for after it started', async () => {
  const from = payloads.length;
  const leases = Array.from({ length: 40 }, (_, n) => ({ kind: 'lease', id: 1000 + n }) as const);
  const first = signalWorkers(database.db, [{ kind: 'resource', id: 7 }]);
  // These come while the first is in flight: they share the next signal.
  await Promise.all([first, signalWorkers(database.db, leases.slice(0, 20)), signalWorkers(database.db, leases.slice(20))]);
  await waitFor('both signals to be heard', async () => payloads.length >= from + 2);
  const [one, two] = payloads.slice(from).map(namedObjects);
  expect(one).toEqual([{ kind: 'resource', id: 7 }]);
  expect(two).toEqual(leases.slice(0, 32));
});

test('a payload that names nothing readable names nothing (every signal still means "look")', () => {
  expect(namedObjects(undefined)).toEqual([]);
  expect(namedObjects('')).toEqual([]);
  expect(namedObjects('lease:0,job:3,lease:x,resource:12345678901234567,blueprint:4')).toEqual([{ kind: 'blueprint', id: 4 }]);
});
