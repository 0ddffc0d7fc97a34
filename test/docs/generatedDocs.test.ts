import { expect, test } from 'vitest';
import { GENERATED_SECTIONS } from '../../scripts/docs/generatedSections.ts';
import { renderGeneratedPages } from '../../scripts/docs/markers.ts';

test('the generated sections of docs/ are what `npm run docs` writes from the code now', async () => {
  const pages = await renderGeneratedPages();
  expect(pages.map((p) => p.page).sort()).toEqual([...new Set(Object.values(GENERATED_SECTIONS).map((s) => s.page))].sort());
  for (const { page, committed, generated } of pages) {
    expect(committed, `${page} is out of date: run \`npm run docs\` and commit it`).toBe(generated);
  }
});

test('the state table lists every lease state with the commands it accepts', async () => {
  const [concepts] = (await renderGeneratedPages()).filter((p) => p.page === 'docs/concepts.md');
  // A row read from src/domain/lifecycle.ts, as an operator sees it.
  expect(concepts!.generated).toContain('| `released` | `destroyed` | destroy, grant, deny |');
});

test('every setting in src/config.ts appears in the configuration table', async () => {
  const { ConfigSchema } = await import('../../src/config.ts');
  const [operations] = (await renderGeneratedPages()).filter((p) => p.page === 'docs/operations.md');
  for (const name of Object.keys(ConfigSchema.shape)) expect(operations!.generated).toContain(`| \`${name}\` |`);
});
