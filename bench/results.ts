import { readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServerInfo } from './server.ts';

/**
 * The committed figures: the latest published run on each kind of server,
 * one file each, that docs/benchmark.md's table is generated from
 * (`npm run bench:publish`, then `npm run docs`).
 */
export const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));

/** The time-driven work's committed figures (bench/runTimeliness.ts), one file per kind of server, named as the main run's. */
export const TIMELINESS_RESULTS_DIR = fileURLToPath(new URL('./results/timeliness/', import.meta.url));

/** A run's file name among the results: by the server's major release, and whether it was the embedded one. */
export function resultsName(server: ServerInfo): string {
  return `${server.embedded ? 'embedded-' : ''}postgresql-${server.major}.json`;
}

/** The committed results files, by name. */
export async function resultsFiles(dir = RESULTS_DIR): Promise<string[]> {
  const names = await readdir(dir).catch(() => []);
  return names
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => path.join(dir, name));
}

/** A URL that carries a user (and so perhaps a password): the embedded server's has a generated one. */
const URL_WITH_USER = /\b[a-z][a-z0-9+.-]*:\/\/[^\s/@"]+@/i;
/** An absolute path of two segments or more, e.g. /home/me/slipway or /tmp/x. */
const ABSOLUTE_PATH = /(^|[\s="'(:,])\/[\w.-]+\//;

/**
 * Why a figures file's text may not be published, or undefined: a URL
 * with a user or password, the word "password", or a path of this
 * machine. Figures hold neither by construction (the report names the
 * server, never its URL; the reproduce command leaves secrets and places
 * out); this keeps a later change from publishing one unseen.
 */
export function unpublishable(text: string): string | undefined {
  const places = [process.cwd(), os.homedir(), os.tmpdir()].filter((place) => place.length > 1);
  if (URL_WITH_USER.test(text)) return 'it holds a URL with a user name (and perhaps a password)';
  if (/password/i.test(text)) return 'it mentions a password';
  const place = places.find((p) => text.includes(p));
  if (place) return `it holds a path of this machine (${place})`;
  if (ABSOLUTE_PATH.test(text)) return `it holds an absolute path (${ABSOLUTE_PATH.exec(text)![0].trim()}…)`;
  return undefined;
}
