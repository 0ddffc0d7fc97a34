import { pino } from 'pino';
import { expect, test } from 'vitest';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { inProcessApp } from './support/inProcessApp.ts';

/** What the API writes to its log about a request, read back from a real logger at `info`. */
const env = apiTestEnv({ worker: false });

test('requests are not logged unless SLIPWAY_LOG_REQUESTS is true; a failed one is', async () => {
  for (const [settings, logsRequests] of [
    [{}, false],
    [{ SLIPWAY_LOG_REQUESTS: 'true' }, true],
  ] as const) {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const { app, close } = await inProcessApp(env.database, log, env.database, settings);
    try {
      const answer = await app.inject({ method: 'GET', url: '/v1/leases', headers: { authorization: `Bearer ${env.as.viewer.token}` } });
      expect(answer.statusCode).toBe(200);
    } finally {
      await close();
    }
    expect(
      lines.some((line) => line.includes('"url":"/v1/leases"')),
      JSON.stringify(settings),
    ).toBe(logsRequests);
  }
});

test('a token sent in the query string is refused and never written to the log', async () => {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const { app, close } = await inProcessApp(env.database, log, env.database, { SLIPWAY_LOG_REQUESTS: 'true' });
  const secret = env.as.admin.token!;
  try {
    for (const url of [`/v1/leases?token=${secret}`, `/v1/leases?access_token=${encodeURIComponent(secret)}&limit=5`, `/v1/leases/${secret}`]) {
      const answer = await app.inject({ method: 'GET', url });
      expect(answer.statusCode, `${url}: ${answer.body}`).toBe(401);
      expect(answer.body).not.toContain(secret);
    }
  } finally {
    await close();
  }
  const logged = lines.join('');
  // The requests were logged, with their URLs...
  expect(logged).toMatch(/"url":"\/v1\/leases\?token=\[redacted\]"/);
  expect(logged).toMatch(/"url":"\/v1\/leases\?access_token=\[redacted\]&limit=5"/);
  expect(logged).toMatch(/"url":"\/v1\/leases\/slw_\[redacted\]"/);
  // ...and the secret nowhere.
  expect(logged).not.toContain(secret.slice(4));
});
