import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * The release before this checkout's code, found from the history rather
 * than a constant: a release is the commit that sets package.json's
 * `version` (the release step in docs/development.md). Releases made before
 * that rule are named in CHANGELOG.md's headings, `## [0.1.0] - 2026-12-06
 * (c86a86c)`. The previous release is the newest of these that is an
 * ancestor of HEAD and not HEAD itself, so the release commit itself is
 * tested against the release before it. Undefined when the history does not
 * hold one (a shallow clone).
 */
export function previousRelease(): { readonly version: string; readonly commit: string } | undefined {
  let order: string[];
  try {
    order = git('rev-list', '--topo-order', 'HEAD').split('\n').filter(Boolean);
  } catch {
    return undefined;
  }
  const position = new Map(order.map((commit, n) => [commit, n]));
  const candidates = [...versionChanges(), ...changelogReleases()]
    .map((release) => ({ ...release, at: position.get(release.commit) }))
    .filter((release): release is typeof release & { at: number } => release.at !== undefined && release.at > 0);
  candidates.sort((a, b) => a.at - b.at);
  const newest = candidates[0];
  return newest && { version: newest.version, commit: newest.commit };
}

/** The commits that changed package.json's version, with the version each set. */
function versionChanges(): { version: string; commit: string }[] {
  const commits = git('log', '--format=%H', '-G', '"version":', '--', 'package.json').split('\n').filter(Boolean);
  return commits.flatMap((commit) => {
    const version = versionAt(commit);
    const before = git('rev-list', '--max-count=1', '--skip=1', commit, '--', 'package.json');
    return version !== undefined && (before === '' || versionAt(before) !== version) ? [{ version, commit }] : [];
  });
}

function versionAt(commit: string): string | undefined {
  try {
    return (JSON.parse(git('show', `${commit}:package.json`)) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/** Releases CHANGELOG.md names with their commit (those made before a release was its version's commit). */
function changelogReleases(): { version: string; commit: string }[] {
  const text = readFileSync('CHANGELOG.md', 'utf8');
  return [...text.matchAll(/^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2} \(([0-9a-f]{7,40})\)$/gm)].flatMap(([, version, short]) => {
    try {
      return [{ version: version!, commit: git('rev-parse', '--verify', `${short}^{commit}`) }];
    } catch {
      return [];
    }
  });
}

function git(...args: string[]): string {
  return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
}
