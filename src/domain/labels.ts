import { z } from 'zod';

/**
 * Labels and label selectors, in the Kubernetes grammar
 * (docs/scheduling.md#labels-and-selectors). A resource's labels say what
 * it is (`os=linux`, `gpu=a100`); a lease's selector says what it needs:
 *
 *   gpu=a100        gpu == a100 (also written gpu==a100)
 *   os!=windows     no os label, or one other than windows
 *   arch in (arm64, amd64)
 *   zone notin (eu-1)   no zone label, or one not listed
 *   ssd             has an ssd label, whatever its value
 *   !spot           has no spot label
 *
 * Requirements are separated by commas and must all hold.
 */
const NAME = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;
const PREFIX = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;

/** Why a label key is not one, or undefined if it is. */
function keyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const [prefix, name] = slash === -1 ? [undefined, key] : [key.slice(0, slash), key.slice(slash + 1)];
  if (prefix !== undefined && !PREFIX.test(prefix)) return `"${key}" has a prefix that is not a DNS name (lower-case, at most 253 characters)`;
  if (!NAME.test(name))
    return `"${key}" is not a label key: use at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit (with an optional prefix/)`;
  return undefined;
}

/** Why a label value is not one, or undefined if it is. */
function valueProblem(value: string): string | undefined {
  return value === '' || NAME.test(value)
    ? undefined
    : `"${value}" is not a label value: use at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit`;
}

export type Labels = Readonly<Record<string, string>>;

/** A map of labels, each key and value checked. */
export const LabelsSchema = z.record(z.string(), z.string()).superRefine((labels, ctx) => {
  if (Object.keys(labels).length > 64) ctx.addIssue({ code: 'custom', message: 'expected at most 64 labels' });
  for (const [key, value] of Object.entries(labels)) {
    const problem = keyProblem(key) ?? valueProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, path: [key] });
  }
});

export type Operator = 'in' | 'notin' | 'exists' | '!exists';

/** One requirement of a selector: `key in (values)` and so on; `=` is `in` of one value, `!=` `notin` of one. */
export interface Requirement {
  readonly key: string;
  readonly op: Operator;
  readonly values: readonly string[];
}

export type Selector = readonly Requirement[];

/** A selector that cannot be read: `message` says what was wrong where, and what would be right. */
export class SelectorSyntaxError extends Error {
  override name = 'SelectorSyntaxError';
}

/** Reads a selector; throws SelectorSyntaxError saying what was wrong and where. */
export function parseSelector(text: string): Selector {
  let at = 0;
  const fail = (what: string): never => {
    throw new SelectorSyntaxError(`${what} at character ${at + 1} of "${text}"; expected e.g. "gpu=a100, os in (linux, bsd), !spot"`);
  };
  const skip = () => {
    while (text[at] === ' ') at++;
  };
  const word = () => {
    skip();
    const match = /^[A-Za-z0-9._/-]+/.exec(text.slice(at));
    if (!match) return '';
    at += match[0].length;
    return match[0];
  };
  const requirements: Requirement[] = [];
  do {
    skip();
    const negated = text[at] === '!' && text[at + 1] !== '=';
    if (negated) at++;
    const key = word();
    if (key === '') fail('a label key is missing');
    const bad = keyProblem(key);
    if (bad) fail(bad);
    skip();
    let requirement: Requirement;
    if (negated) requirement = { key, op: '!exists', values: [] };
    else if (text.startsWith('==', at) || text.startsWith('!=', at) || text[at] === '=') {
      const op = text.startsWith('!=', at) ? 'notin' : 'in';
      at += text.startsWith('==', at) || text.startsWith('!=', at) ? 2 : 1;
      const value = word();
      const badValue = valueProblem(value);
      if (badValue) fail(badValue);
      requirement = { key, op, values: [value] };
    } else if (/^(in|notin)\b/.test(text.slice(at))) {
      const op = text.startsWith('notin', at) ? 'notin' : 'in';
      at += op.length;
      skip();
      if (text[at] !== '(') fail(`"${op}" needs a list of values in parentheses`);
      at++;
      const values: string[] = [];
      for (;;) {
        const value = word();
        const badValue = value === '' ? 'a value is missing' : valueProblem(value);
        if (badValue) fail(badValue);
        values.push(value);
        skip();
        if (text[at] === ',') at++;
        else if (text[at] === ')') break;
        else fail('expected "," or ")" in the list of values');
      }
      at++;
      requirement = { key, op, values: [...new Set(values)] };
    } else requirement = { key, op: 'exists', values: [] };
    requirements.push(requirement);
    skip();
    if (at >= text.length) break;
    if (text[at] !== ',') fail('expected "," between requirements');
    at++;
  } while (requirements.length <= 32);
  if (requirements.length > 32) throw new SelectorSyntaxError('a selector has at most 32 requirements');
  return requirements;
}

/** A selector's text as a request gives it, checked (an issue says what was wrong) but kept as text. */
export const SelectorTextSchema = z
  .string()
  .min(1, 'expected a label selector, e.g. "gpu=a100, os in (linux)"')
  .max(1000)
  .superRefine((text, ctx) => {
    try {
      parseSelector(text);
    } catch (error) {
      if (!(error instanceof SelectorSyntaxError)) throw error;
      ctx.addIssue({ code: 'custom', message: error.message });
    }
  });

/** A selector's text, read. */
export const SelectorSchema = SelectorTextSchema.transform((text) => parseSelector(text));

/** Whether `labels` satisfy one requirement. */
function holds(r: Requirement, labels: Labels): boolean {
  const value = Object.hasOwn(labels, r.key) ? labels[r.key] : undefined;
  switch (r.op) {
    case 'exists':
      return value !== undefined;
    case '!exists':
      return value === undefined;
    case 'in':
      return value !== undefined && r.values.includes(value);
    case 'notin':
      return value === undefined || !r.values.includes(value);
  }
}

export function matches(selector: Selector, labels: Labels): boolean {
  return selector.every((r) => holds(r, labels));
}

/** One requirement as text, the way a selector writes it. */
export function formatRequirement(r: Requirement): string {
  if (r.op === 'exists') return r.key;
  if (r.op === '!exists') return `!${r.key}`;
  if (r.values.length === 1) return `${r.key}${r.op === 'in' ? '=' : '!='}${r.values[0]}`;
  return `${r.key} ${r.op} (${r.values.join(', ')})`;
}

/** A selector as its canonical text: what is stored and shown. */
export function formatSelector(selector: Selector): string {
  return selector.map(formatRequirement).join(', ');
}

/** The first requirement `labels` fail, in words ("gpu=a100, but gpu is t4"), or undefined when they match. */
export function mismatch(selector: Selector, labels: Labels): string | undefined {
  const failed = selector.find((r) => !holds(r, labels));
  if (!failed) return undefined;
  const value = Object.hasOwn(labels, failed.key) ? labels[failed.key] : undefined;
  return `${formatRequirement(failed)}, but ${value === undefined ? `there is no ${failed.key} label` : `${failed.key} is ${value}`}`;
}

/** Labels as text, `key=value` by key, comma-separated; empty for none. */
export function labelsText(labels: Labels): string {
  const pairs = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1));
  return pairs.map(([key, value]) => `${key}=${value}`).join(', ');
}

/** A resource's labels: those its driver reported, with its blueprint's over them. */
export function resourceLabels(reported: unknown, blueprintLabels: unknown): Labels {
  return { ...(reported as Labels), ...(blueprintLabels as Labels) };
}

/**
 * Why no resource a blueprint may have can ever match `selector`, or
 * undefined when one may. `possible` is every set of labels its driver may
 * report (see DriverFactory.possibleLabels); undefined when the driver may
 * report any, and then only the requirements on the blueprint's own label
 * keys can be judged in advance.
 */
export function whyNeverMatches(selector: Selector, blueprintLabels: Labels, possible: readonly Labels[] | undefined): string | undefined {
  if (possible === undefined) {
    const judged = selector.filter((r) => Object.hasOwn(blueprintLabels, r.key));
    return mismatch(judged, blueprintLabels);
  }
  const sets = possible.map((reported) => resourceLabels(reported, blueprintLabels));
  if (sets.some((labels) => matches(selector, labels))) return undefined;
  const reasons = [...new Set(sets.map((labels) => mismatch(selector, labels)!))];
  return reasons.length <= 3 ? reasons.join('; ') : `${reasons.slice(0, 3).join('; ')}; and ${reasons.length - 3} other reason(s)`;
}
