import { expect, test } from 'vitest';
import { cliTestEnv } from './cliTestEnv.ts';
import { parseJson } from './runCli.ts';

// `--label` on blueprints and `--selector` on leases.
const env = cliTestEnv();

test('blueprint create --label and lease create --selector alone: the lease goes where it matches and shows its selector', async () => {
  const made = await env.cli(
    'blueprint',
    'create',
    '--name',
    'gpus',
    '--driver',
    'simulated',
    '--max-resources',
    '1',
    '--label',
    'gpu=a100',
    '--label',
    'os=linux',
  );
  expect(made.stderr).toBe('');
  expect(made.stdout).toMatch(/\n {2}labels +gpu=a100, os=linux\n/);
  await env.cli('blueprint', 'create', '--name', 'cpus', '--driver', 'simulated', '--max-resources', '1', '--label', 'os=linux');

  const leased = parseJson(await env.cli('--json', 'lease', 'create', '--selector', 'gpu, os=linux'));
  expect(leased.lease).toMatchObject({ blueprintName: 'gpus', selector: 'gpu, os=linux', state: 'active' });
  const shown = await env.cli('lease', 'show', String(leased.lease.id));
  expect(shown.stdout).toMatch(/\n {2}selector +gpu, os=linux\n/);
  const resource = await env.cli('resource', 'show', String(leased.lease.resourceId));
  expect(resource.stdout).toMatch(/\n {2}labels +gpu=a100, os=linux\n/);

  const limits = await env.cli('blueprint', 'limits', 'cpus', '--label', 'os=bsd');
  expect(limits.stdout).toMatch(/\n {2}labels +os=bsd\n/);
  await env.cli('lease', 'release', String(leased.lease.id));
});
