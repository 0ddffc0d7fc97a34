import path from 'node:path';
import type { Config } from '../config.ts';

/**
 * Where the data lives, for people, without the password: "PostgreSQL at
 * slipway@db.example:5432/slipway" or "embedded PostgreSQL under .slipway/pg".
 */
export function describeDatabase(config: Config): string {
  if (!config.DATABASE_URL) {
    return `embedded PostgreSQL under ${path.relative(process.cwd(), path.join(config.homeDir, 'pg'))}`;
  }
  const url = new URL(config.DATABASE_URL);
  const user = url.username ? `${decodeURIComponent(url.username)}@` : '';
  return `PostgreSQL at ${user}${url.host}${url.pathname}`;
}

/** What a migration run did: "applied 0001_core, 0002_x" or "up to date". */
export function describeMigrations(applied: readonly string[]): string {
  return applied.length > 0 ? `applied ${applied.join(', ')}` : 'up to date';
}
