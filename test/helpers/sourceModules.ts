import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The source modules behind the files a process loaded from the package in
 * `packageDir`: each of the build's bundled files stands for the modules
 * that dist/modules.json says it holds (scripts/build.mjs), named as they
 * sit in a checkout under `packageDir`; any other file (the TypeScript
 * source, a package left in node_modules) stands for itself. So one check
 * of which modules a call loads holds for the source and the build alike.
 */
export function sourceModulesIn(files: readonly string[], packageDir: string): string[] {
  const dist = path.join(packageDir, 'dist');
  let bundled: Record<string, string[]> | undefined;
  return files.flatMap((file) => {
    if (!file.startsWith(`${dist}/`)) return [file];
    bundled ??= JSON.parse(readFileSync(path.join(dist, 'modules.json'), 'utf8')) as Record<string, string[]>;
    return bundled[path.relative(dist, file)]?.map((module) => path.join(packageDir, module)) ?? [file];
  });
}
