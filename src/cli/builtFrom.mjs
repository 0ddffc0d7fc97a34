// What dist/ was built from, and whether a checkout's source has changed
// since: plain JavaScript, shared by the build (scripts/build.mjs) and the
// compiled launcher (bin.mjs under dist/), which checks it before every call
// in a checkout so that it never runs JavaScript older than the source.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** The folders and files the build reads; a change to any of them may change what it writes. */
const SOURCE_DIRS = ['src', 'migrations'];
const SOURCE_FILES = ['package.json', 'tsconfig.json', 'tsconfig.build.json'];

/**
 * Each source file (relative to `root`, forward slashes) with its size and
 * modification time. Sizes and times rather than contents: reading every
 * file would cost a call more than the check is worth, and an edit, a
 * checkout of another commit, a new file or a deleted one all show in them.
 */
export function sourceStamps(root) {
  const stamps = {};
  const stamp = (relative) => {
    const stat = statSync(path.join(root, relative));
    stamps[relative] = `${stat.size}:${stat.mtimeMs}`;
  };
  for (const file of SOURCE_FILES) stamp(file);
  const walk = (relative) => {
    for (const entry of readdirSync(path.join(root, relative), { withFileTypes: true })) {
      const child = `${relative}/${entry.name}`;
      if (entry.isDirectory()) walk(child);
      else if (entry.isFile()) stamp(child);
    }
  };
  for (const dir of SOURCE_DIRS) walk(dir);
  return stamps;
}

/**
 * Why the build under `root`/dist does not match the source beside it (a
 * phrase naming the first file that differs), or undefined when it does.
 */
export function staleBuild(root) {
  let built;
  try {
    built = JSON.parse(readFileSync(path.join(root, 'dist', 'build.json'), 'utf8')).sources;
  } catch {
    return 'dist/ has no record of what it was built from';
  }
  const now = sourceStamps(root);
  for (const [file, stamp] of Object.entries(now)) {
    if (built[file] === undefined) return `${file} is newer than dist/`;
    if (built[file] !== stamp) return `${file} changed after dist/ was built`;
  }
  for (const file of Object.keys(built)) if (now[file] === undefined) return `${file} was removed after dist/ was built`;
  return undefined;
}
