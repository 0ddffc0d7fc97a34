import { expect, test } from 'vitest';
import { waitFor } from '../helpers/waitFor.ts';
import { cliTestEnv } from './cliTestEnv.ts';
import { parseJson } from './runCli.ts';

// `slipway reservation create|list|show|cancel`, and `lease create|run --reservation`.
const env = cliTestEnv();

const leaseState = async (id: number) => parseJson(await env.cli('--json', 'lease', 'show', String(id))).lease.state;

test('reservation create, list, show and cancel; a lease created with --reservation is served from it while others wait', async () => {
  await env.cli('blueprint', 'create', '--name', 'hosts', '--driver', 'simulated', '--max-resources', '2', '--leases-per-resource', '1');
  const made = await env.cli('reservation', 'create', '--blueprint', 'hosts', '--slots', '1', '--to', '+1h', '--reason', 'release night');
  expect(made.stderr).toBe('');
  expect(made.stdout).toMatch(/^reservation (\d+): 1 slot\(s\) of hosts from \S+ \S+ to \S+ \S+ for anyone \(active\)\n$/);
  const id = Number(/^reservation (\d+)/.exec(made.stdout)![1]);

  const listed = parseJson(await env.cli('--json', 'reservation', 'list', '--blueprint', 'hosts'));
  expect(listed.items).toHaveLength(1);
  expect(listed.items[0]).toMatchObject({ id, slots: 1, state: 'active', reason: 'release night', createdSource: 'cli' });
  const table = await env.cli('reservation', 'list');
  expect(table.stdout).toMatch(/^ID\s+BLUEPRINT\s+SLOTS\s+FROM\s+TO\s+STATE\s+FOR\s+HOLDING\s+WAITING\n/);

  // One slot is free beside the reserved one: an ordinary lease takes it; a second waits, the reserved slot held back.
  const first = parseJson(await env.cli('--json', 'lease', 'create', '--blueprint', 'hosts'));
  expect(first.lease.state).toBe('active');
  const second = parseJson(await env.cli('--json', 'lease', 'create', '--blueprint', 'hosts', '--no-wait'));
  await waitFor('the second lease to wait', async () =>
    (await env.cli('lease', 'show', String(second.lease.id))).stdout.includes(`1 slot(s) held for reservation(s) ${id}`),
  );
  const reserved = parseJson(await env.cli('--json', 'lease', 'create', '--reservation', String(id)));
  expect(reserved.lease).toMatchObject({ state: 'active', reservationId: id, blueprintName: 'hosts' });
  const run = await env.cli('lease', 'run', '--reservation', String(id), '--wait-timeout', '5s', '--', 'true');
  // The reservation's one slot is in use: the run's lease waits in line, past its deadline.
  expect(run.code).toBe(122);

  const shown = await env.cli('reservation', 'show', String(id));
  expect(shown.stdout).toMatch(/\n {2}leases +1 holding, 0 waiting\n/);
  expect(shown.stdout).toMatch(/\n {2}created +\S+ \S+ by \S+@\S+ \(cli\): release night\n/);

  // Given back, the reserved slot is held for the reservation again; cancelled, it goes to the line.
  await env.cli('lease', 'release', String(reserved.lease.id));
  expect(await leaseState(second.lease.id)).toBe('pending');
  const cancelled = await env.cli('reservation', 'cancel', String(id), '--reason', 'done early');
  expect(cancelled.stdout).toMatch(new RegExp(`^reservation ${id}: .* \\(cancelled\\)\\n$`));
  await waitFor('the second lease to be active', async () => (await leaseState(second.lease.id)) === 'active');
  expect((await env.cli('reservation', 'show', String(id))).stdout).toMatch(/\n {2}cancelled +\S+ \S+ by \S+@\S+ \(cli\): done early\n/);
  for (const lease of [first, second]) await env.cli('lease', 'release', String(lease.lease.id));
});

test('a reservation the blueprint cannot hold is refused, exit 4 with why; a lease naming one it may not use is refused', async () => {
  await env.cli('blueprint', 'create', '--name', 'boards', '--driver', 'simulated', '--max-resources', '1', '--leases-per-resource', '1');
  const refused = await env.cli('reservation', 'create', '--blueprint', 'boards', '--slots', '2', '--from', '+1h', '--to', '+2h');
  expect(refused.code).toBe(4);
  expect(refused.stderr).toMatch(/^error: blueprint boards cannot hold 2 slot\(s\) from .* it has 1 .*so 1 can be reserved: ask for at most 1/);
  const later = parseJson(await env.cli('--json', 'reservation', 'create', '--blueprint', 'boards', '--slots', '1', '--from', '+1h', '--to', '+2h'));
  expect(later.state).toBe('upcoming');
  const early = await env.cli('lease', 'create', '--reservation', String(later.id));
  expect(early.code).toBe(4);
  expect(early.stderr).toMatch(new RegExp(`^error: the lease may not use reservation ${later.id}: its window starts at .*: name it from then`));
  expect(parseJson(await env.cli('--json', 'lease', 'list', '--blueprint', 'boards')).items).toEqual([]);
});
