import { chmod, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { callbackSecretPath, loadCallbackSecret } from '../../src/callbacks/callbackSecret.ts';
import { ConfigError } from '../../src/config.ts';

let homeDir: string;
beforeEach(async () => {
  homeDir = path.join(await mkdtemp(path.join(os.tmpdir(), 'slipway-secret-')), 'home');
});
afterEach(async () => rm(path.dirname(homeDir), { recursive: true, force: true }));

test('SLIPWAY_CALLBACK_SECRET wins, and nothing is written', async () => {
  const secret = 'x'.repeat(40);
  expect(await loadCallbackSecret({ homeDir, SLIPWAY_CALLBACK_SECRET: secret })).toBe(secret);
  await expect(stat(homeDir)).rejects.toThrow(/ENOENT/);
});

test('without it, a secret is generated once under SLIPWAY_HOME, private to its owner, and every loader gets the same', async () => {
  const secrets = await Promise.all(Array.from({ length: 8 }, () => loadCallbackSecret({ homeDir, SLIPWAY_CALLBACK_SECRET: undefined })));
  expect(new Set(secrets).size).toBe(1);
  expect(secrets[0]).toMatch(/^[0-9a-f]{64}$/);
  expect((await stat(callbackSecretPath({ homeDir }))).mode & 0o777).toBe(0o600);
  expect(await readdir(homeDir)).toEqual(['callback-secret']);
  expect(await loadCallbackSecret({ homeDir, SLIPWAY_CALLBACK_SECRET: undefined })).toBe(secrets[0]);
});

test('a secret file others can read is refused, saying how to fix it', async () => {
  await loadCallbackSecret({ homeDir, SLIPWAY_CALLBACK_SECRET: undefined });
  await chmod(callbackSecretPath({ homeDir }), 0o644);
  const loading = loadCallbackSecret({ homeDir, SLIPWAY_CALLBACK_SECRET: undefined });
  await expect(loading).rejects.toBeInstanceOf(ConfigError);
  await expect(loading).rejects.toThrow(/is readable by others; make it private \(chmod 600\) or set SLIPWAY_CALLBACK_SECRET/);
});
