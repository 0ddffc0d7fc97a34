/**
 * What PostgreSQL cannot store, and what Slipway will not walk: text with a
 * NUL character (U+0000; `text` and `jsonb` refuse it, 22021/22P05) or with a
 * lone UTF-16 surrogate (not Unicode, so not UTF-8), and JSON nested deeper
 * than MAX_JSON_DEPTH (serialising it again would overflow the stack). Every
 * value that comes in (an API request's body, query and path; a CLI
 * argument) is checked here, once, before any schema sees it.
 */

/** The deepest nesting accepted in any JSON value: `{"a":{"b":1}}` is 2 deep. */
export const MAX_JSON_DEPTH = 32;

export interface UnstorablePart {
  /** Where in the value: keys and indexes from its root. */
  readonly path: readonly (string | number)[];
  readonly message: string;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** The text's problem, or undefined when PostgreSQL can store it. */
function textProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'must be valid Unicode (it has a lone UTF-16 surrogate)';
  return undefined;
}

/** The first part of `value` that cannot be stored (see above), or undefined. Walks no deeper than the limit. */
export function findUnstorable(value: unknown): UnstorablePart | undefined {
  const pending: { value: unknown; path: (string | number)[] }[] = [{ value, path: [] }];
  while (pending.length > 0) {
    const { value: next, path } = pending.pop()!;
    if (typeof next === 'string') {
      const problem = textProblem(next);
      if (problem) return { path, message: problem };
      continue;
    }
    if (typeof next !== 'object' || next === null) continue;
    if (path.length >= MAX_JSON_DEPTH)
      return { path, message: `is nested too deep: at most ${MAX_JSON_DEPTH} levels of objects and arrays are accepted` };
    for (const [key, child] of Object.entries(next)) {
      const keyProblem = textProblem(key);
      if (keyProblem) return { path, message: `has a key that ${keyProblem}` };
      pending.push({ value: child, path: [...path, Array.isArray(next) ? Number(key) : key] });
    }
  }
  return undefined;
}
