import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../../db/Database.ts';
import { CommandRejectedError } from '../../domain/errors.ts';
import { createToken } from './tokens.ts';

/** The file, under SLIPWAY_HOME, where the first start leaves the admin token's secret. */
export const FIRST_ADMIN_TOKEN_FILE = 'admin-token';

/**
 * On a database without any token, creates the token `admin` (role admin)
 * and writes its secret to `<home>/admin-token`, readable by its owner only
 * (mode 0600), so the first user of a fresh install can call the API and
 * make tokens of their own. Returns the file's path, or undefined when
 * there were tokens already (or another process made this one first).
 */
export async function ensureFirstAdminToken(db: Db, homeDir: string): Promise<string | undefined> {
  const any = await db.selectFrom('api_tokens').select('id').limit(1).executeTakeFirst();
  if (any) return undefined;
  let secret: string;
  try {
    ({ secret } = await createToken(db, { name: 'admin', role: 'admin' }, 'slipway start'));
  } catch (error) {
    if (error instanceof CommandRejectedError) return undefined;
    throw error;
  }
  const file = path.join(homeDir, FIRST_ADMIN_TOKEN_FILE);
  await mkdir(homeDir, { recursive: true });
  await writeFile(file, `${secret}\n`, { mode: 0o600 });
  return file;
}
