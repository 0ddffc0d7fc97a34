import { randomBytes } from 'node:crypto';
import { link, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Config } from '../config.ts';

/** Where the generated secret lives when SLIPWAY_CALLBACK_SECRET is not set. */
export function callbackSecretPath(config: Pick<Config, 'homeDir'>): string {
  return path.join(config.homeDir, 'callback-secret');
}

/**
 * The key callbacks are signed with: SLIPWAY_CALLBACK_SECRET, or else the
 * contents of `<SLIPWAY_HOME>/callback-secret`, made on first use (32 random
 * bytes, hex, mode 0600). Several workers sharing SLIPWAY_HOME may race to
 * make it: each writes a file of its own and links it into place, which
 * succeeds for exactly one; nobody ever reads a half-written secret.
 * Workers on different hosts must be given the same SLIPWAY_CALLBACK_SECRET.
 */
export async function loadCallbackSecret(config: Pick<Config, 'homeDir' | 'SLIPWAY_CALLBACK_SECRET'>): Promise<string> {
  if (config.SLIPWAY_CALLBACK_SECRET) return config.SLIPWAY_CALLBACK_SECRET;
  const file = callbackSecretPath(config);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const draft = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(draft, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  try {
    await link(draft, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await rm(draft, { force: true });
  }
  if (((await stat(file)).mode & 0o077) !== 0) {
    throw new ConfigError(`${file} is readable by others; make it private (chmod 600) or set SLIPWAY_CALLBACK_SECRET`);
  }
  const secret = (await readFile(file, 'utf8')).trim();
  if (secret.length < 32) {
    throw new ConfigError(`${file} holds ${secret.length} characters; a callback secret needs at least 32`);
  }
  return secret;
}
