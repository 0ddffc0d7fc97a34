import { expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { cliTestEnv } from './cliTestEnv.ts';
import { finished, parseJson, spawnCli } from './runCli.ts';

// A lease create that stops waiting before its lease is active: Ctrl-C, --timeout, or nobody reading its output.

const env = cliTestEnv();
const actor = { issuedBy: 'tester', source: 'cli' } as const;

/** A blueprint with one slot, taken by an active lease: a new lease there waits until that one goes. */
async function fullBlueprint(name: string): Promise<{ occupant: number }> {
  await createBlueprint(env.database.db, { name, driver: 'simulated', maxResources: 1 }, actor);
  const run = await env.cli('--json', 'lease', 'create', '--blueprint', name);
  expect(run.code).toBe(0);
  return { occupant: parseJson(run).lease.id };
}

/** A lease create on `blueprint`, and the lease it requested once it waits there for room. */
async function waitingLeaseCreate(blueprint: string, ...options: string[]) {
  const child = spawnCli(['lease', 'create', '--blueprint', blueprint, ...options], env.database.url);
  let stdout = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  const output = finished(child);
  const requested = /^lease (\d+) requested for \S+ \(command (\d+)\)$/m;
  const [, lease, command] = await waitFor('the lease to be requested', async () => requested.exec(stdout) ?? undefined);
  await waitFor('the lease to wait at its blueprint', () =>
    env.database.db.selectFrom('blueprint_waiters').select('lease_id').where('lease_id', '=', Number(lease)).executeTakeFirst(),
  );
  return { child, output, lease: Number(lease), command: Number(command) };
}

/** The advice the CLI gives works: the lease it left waiting is released (and destroyed). */
async function releaseAsAdvised(stderr: string, lease: number): Promise<void> {
  const advice = / release the lease with: slipway (lease release \d+)\n$/.exec(stderr)?.[1];
  expect(advice).toBe(`lease release ${lease}`);
  const release = await env.cli(...advice!.split(' '));
  expect(release.code).toBe(0);
  expect(release.stdout).toMatch(new RegExp(`^lease ${lease} is destroyed$`, 'm'));
}

test('Ctrl-C on a waiting lease create names the lease it leaves pending and how to release it', async () => {
  await fullBlueprint('full-ctrl-c');
  const waiting = await waitingLeaseCreate('full-ctrl-c');
  waiting.child.kill('SIGINT');
  const run = await waiting.output;
  expect(run.code).toBe(130);
  expect(run.stderr).toBe(
    `error: stopped waiting; lease ${waiting.lease} is not active yet; command ${waiting.command} carries on ` +
      `(see \`slipway command show ${waiting.command}\`); release the lease with: slipway lease release ${waiting.lease}\n`,
  );
  await releaseAsAdvised(run.stderr, waiting.lease);
});

test('--timeout on a waiting lease create names the lease still pending and how to release it', async () => {
  await fullBlueprint('full-timeout');
  // The blueprint stays full: the wait can only time out.
  const waiting = await waitingLeaseCreate('full-timeout', '--timeout', '1');
  const run = await waiting.output;
  expect(run.code).toBe(1);
  expect(run.stderr).toBe(
    `error: timed out after 1s; lease ${waiting.lease} is still pending; command ${waiting.command} carries on ` +
      `(see \`slipway command show ${waiting.command}\`); release the lease with: slipway lease release ${waiting.lease}\n`,
  );
  await releaseAsAdvised(run.stderr, waiting.lease);
});

test('a waiting lease create whose output is closed (| head -1) exits 141 without a word on stderr', async () => {
  const { occupant } = await fullBlueprint('full-head');
  const waiting = await waitingLeaseCreate('full-head');
  // Like `head -1`: read the first line, then close the pipe. The next progress line hits the closed pipe.
  waiting.child.stdout!.destroy();
  expect((await env.cli('lease', 'release', String(occupant))).code).toBe(0);
  const run = await waiting.output;
  expect(run.code).toBe(141);
  expect(run.stderr).toBe('');
  // Only the waiting stopped: the lease it requested carries on and becomes active.
  await waitFor('the lease to be active', async () => {
    const { state } = await env.database.db.selectFrom('leases').select('state').where('id', '=', waiting.lease).executeTakeFirstOrThrow();
    return state === 'active';
  });
});
