import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { expect, test } from 'vitest';

/**
 * The layers of the code, from the bottom (docs/internals.md, "Layers").
 * A file may import files of its own unit and of the layers below its own;
 * units side by side in one layer do not import each other. A unit is a
 * folder (ending in `/`) or a file, and holds what its longest path names.
 */
const LAYERS: ReadonlyArray<{ readonly name: string; readonly units: ReadonlyArray<readonly string[]> }> = [
  { name: 'row types', units: [['migrations/schema.ts']] },
  { name: 'domain', units: [['src/domain/']] },
  {
    name: 'process',
    units: [['src/packageRoot.ts', 'src/version.ts', 'src/log.ts', 'src/graphileLogger.ts', 'src/config.ts', 'src/health/']],
  },
  { name: 'database', units: [['src/db/', 'migrations/']] },
  { name: 'shared services', units: [['src/metrics/'], ['src/read/'], ['src/callbacks/']] },
  { name: 'drivers', units: [['src/drivers/']] },
  { name: 'queue', units: [['src/queue/']] },
  { name: 'objects', units: [['src/objects/']] },
  { name: 'engines', units: [['src/drain/'], ['src/gc/']] },
  { name: 'API', units: [['src/api/']] },
  { name: 'API users', units: [['src/web/'], ['src/client/'], ['src/tasks/']] },
  { name: 'processes', units: [['src/server/'], ['src/worker/']] },
  { name: 'CLI', units: [['src/cli/']] },
];

const root = path.resolve(import.meta.dirname, '..');

interface Place {
  readonly rank: number;
  readonly unit: readonly string[];
  readonly path: string;
}

function placeOf(file: string): Place | undefined {
  let found: Place | undefined;
  LAYERS.forEach((layer, rank) => {
    for (const unit of layer.units) {
      for (const p of unit) {
        const holds = p.endsWith('/') ? file.startsWith(p) : file === p;
        if (holds && (!found || p.length > found.path.length)) found = { rank, unit, path: p };
      }
    }
  });
  return found;
}

/** Every source file the layers cover: src/ and migrations/, in TypeScript or JavaScript. */
function sourceFiles(): string[] {
  return ['src', 'migrations'].flatMap((dir) =>
    readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && /\.(ts|mts|mjs|js)$/.test(e.name))
      .map((e) => path.relative(root, path.join(e.parentPath, e.name))),
  );
}

/** The module specifiers a source text imports: static, type-only, re-exported and dynamic import() alike. */
function specifiersOf(text: string): string[] {
  return ts.preProcessFile(text, true, true).importedFiles.map((i) => i.fileName);
}

/** Why importing `target` from `file` goes against the layers, or undefined if it does not. */
function wrongImport(file: string, target: string): string | undefined {
  const from = placeOf(file);
  const to = placeOf(target);
  if (!from || !to || from.unit === to.unit || to.rank < from.rank) return undefined;
  const unitName = (p: Place) => p.unit.join(' + ');
  if (to.rank === from.rank) {
    return `${unitName(from)} and ${unitName(to)} sit side by side in the layer "${LAYERS[from.rank]?.name}", so neither imports the other`;
  }
  return `${unitName(from)} (layer "${LAYERS[from.rank]?.name}") imports only its own files and the layers below; ${unitName(to)} is in the layer "${LAYERS[to.rank]?.name}" above it`;
}

test('every file of src/ and migrations/ has its place in a layer', () => {
  expect(sourceFiles().filter((file) => !placeOf(file))).toEqual([]);
});

test('no import goes up the layers or sideways into another unit of its layer', () => {
  const wrong: string[] = [];
  for (const file of sourceFiles()) {
    for (const specifier of specifiersOf(readFileSync(path.join(root, file), 'utf8'))) {
      if (!specifier.startsWith('.')) continue;
      const why = wrongImport(file, path.relative(root, path.resolve(root, path.dirname(file), specifier)));
      if (why) wrong.push(`${file} imports '${specifier}': ${why}`);
    }
  }
  expect(wrong).toEqual([]);
});

test('the check sees every form of import, and refuses one that goes up or sideways', () => {
  const forms = [
    "import { run } from '../cli/run.ts';",
    "import type { Program } from '../cli/program.ts';",
    "export { run } from '../cli/run.ts';",
    "const { run } = await import('../cli/run.ts');",
  ];
  for (const form of forms) expect(specifiersOf(form)).toEqual([form.match(/'([^']+)'/)?.[1]]);
  expect(wrongImport('src/domain/lifecycle.ts', 'src/cli/run.ts')).toMatch(/layer "domain".*layer "CLI" above it/);
  expect(wrongImport('src/gc/GcPass.ts', 'src/drain/DrainLane.ts')).toMatch(/side by side in the layer "engines"/);
  expect(wrongImport('src/db/migrate.ts', 'migrations/index.ts')).toBeUndefined();
  expect(wrongImport('src/cli/run.ts', 'src/domain/lifecycle.ts')).toBeUndefined();
});

test('docs/internals.md lists the same layers, from the bottom', () => {
  const doc = readFileSync(path.join(root, 'docs/internals.md'), 'utf8');
  const section = doc.slice(doc.indexOf('\n## Layers\n'), doc.indexOf('\n## ', doc.indexOf('\n## Layers\n') + 1));
  const rows = section
    .split('\n')
    .filter((line) => /^\| \d/.test(line))
    .map((line) => line.split('|').map((cell) => cell.trim()));
  const listed = rows.map(([, layer, units]) => ({
    name: layer?.replace(/^\d+\.\s*/, ''),
    units: units?.split(';').map((u) => [...u.matchAll(/`([^`]+)`/g)].map((m) => m[1])),
  }));
  expect(listed).toEqual(LAYERS.map((l) => ({ name: l.name, units: l.units })));
});
