import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { signalWorkers, WAKE_CHANNEL } from '../../src/queue/wakeSignal.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let listener: pg.Client;
const heard: number[] = [];

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 4 });
  listener = new pg.Client({ connectionString: database.url });
  await listener.connect();
  listener.on('notification', (n) => n.channel === WAKE_CHANNEL && heard.push(Date.now()));
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
