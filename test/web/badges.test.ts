import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import type { CommandStatus } from '../../migrations/schema.ts';
import { LIFECYCLES } from '../../src/domain/lifecycle.ts';
import { stateBadge, statusBadge } from '../../src/web/format.ts';

const css = readFileSync(new URL('../../src/web/assets/app.css', import.meta.url), 'utf8');
const toneOfBadge = (badge: { toString(): string }) => /\btone-([a-z]+)\b/.exec(String(badge))![1]!;

test('every state of every kind, and every command status, has a badge colour in app.css', () => {
  const statuses: CommandStatus[] = ['queued', 'running', 'done', 'failed', 'cancelled', 'coalesced'];
  const badges = [
    ...Object.entries(LIFECYCLES).flatMap(([kind, states]) => Object.keys(states).map((state) => stateBadge(kind as keyof typeof LIFECYCLES, state))),
    ...statuses.map(statusBadge),
  ];
  for (const badge of badges) expect(css, String(badge)).toContain(`.tone-${toneOfBadge(badge)} {`);
});

test('a badge says its value, keeps its value as a class, and is coloured as the state table says', () => {
  expect(String(stateBadge('lease', 'acquired'))).toBe('<span class="badge badge-acquired tone-busy">acquired</span>');
  // Acquired and pending are both on their way, told apart by colour too.
  expect(toneOfBadge(stateBadge('lease', 'pending'))).toBe('waiting');
  expect(toneOfBadge(stateBadge('resource', 'active'))).toBe('good');
  expect(toneOfBadge(stateBadge('blueprint', 'disabled'))).toBe('quiet');
  expect(toneOfBadge(stateBadge('lease', 'broken'))).toBe(toneOfBadge(statusBadge('failed')));
  expect(toneOfBadge(statusBadge('running'))).toBe('busy');
});
