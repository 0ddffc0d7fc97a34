import { afterAll, beforeAll, expect, test } from 'vitest';
import { createToken } from '../../src/api/auth/tokens.ts';
import { finished, spawnCli } from '../cli/runCli.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { ApiClient } from './support/ApiClient.ts';

/** `slipway api` serves the API alone; `slipway start` serves it beside its worker. Both stop cleanly on SIGTERM. */
let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database?.drop());

for (const [command, serves] of [
  ['api', /^HTTP API on (http:\/\/127\.0\.0\.1:\d+) /m],
  ['start', /^HTTP API on (http:\/\/127\.0\.0\.1:\d+) /m],
] as const) {
  test(`slipway ${command} serves the API on the configured host until SIGTERM`, async () => {
    const child = spawnCli([command], database.url);
    const output = finished(child);
    let stdout = '';
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    const url = await waitFor(`${command} to report its API`, async () => serves.exec(stdout)?.[1]);
    expect(stdout).toContain(`web UI on ${url}/ : sign in with a token from \`slipway token create`);
    if (command === 'api') expect(stdout).not.toMatch(/^worker /m);
    else expect(stdout).toMatch(/^worker \S+ running/m);

    const { secret } = await createToken(database.db, { name: `${command}-viewer`, role: 'viewer' }, 'test');
    const client = new ApiClient(url, secret);
    // `start` runs the worker in the same process: its runner is one of the parts /readyz reports.
    const ready = (await client.get('/readyz')).body as { status: string; parts: Record<string, { state: string }> };
    expect(ready.status).toBe('ready');
    expect(Object.keys(ready.parts).sort()).toEqual(command === 'start' ? ['jobs', 'listen', 'wakeups'] : ['listen']);
    expect(Object.values(ready.parts).map((part) => part.state)).toEqual(Object.keys(ready.parts).map(() => 'up'));
    expect((await client.get('/v1/blueprints')).body).toEqual({ items: [], next: null });

    child.kill('SIGTERM');
    const stopped = await output;
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toMatch(/stopping the HTTP API \(SIGTERM\)/);
  });
}
