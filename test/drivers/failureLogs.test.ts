import { pino } from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { drainByHand } from '../helpers/drainByHand.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';

/**
 * A failure a driver reports (its TransientDriverError or
 * PermanentDriverError) is an outcome the timeline records: the worker logs
 * it in one line, with no stack trace. A stack is for a fault.
 */
let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

test('a driver failure the driver reports is logged in one line, without a stack', async () => {
  const lines: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) });
  const actor = { issuedBy: 'tester', source: 'cli' } as const;
  await createBlueprint(
    database.db,
    { name: 'failing', driver: 'simulated', maxResources: 1, leasesPerResource: 1, settings: { permanentFailureRate: 1 } },
    actor,
  );
  await createLease(database.db, { blueprint: 'failing', holder: 'h' }, actor);
  await drainByHand(database, 60_000, database.pool, log).all();

  const failures = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry.msg === 'driver call failed');
  expect(failures.length).toBeGreaterThan(0);
  for (const failure of failures) {
    expect(failure.error).toMatch(/^PermanentDriverError: simulated permanent failure in /);
    expect(JSON.stringify(failure)).not.toMatch(/stack|\\n {4}at /);
  }
});
