import { InvalidArgumentError } from 'commander';
import { z } from 'zod';
import type { CommandStatus, ObjectKind } from '../../migrations/schema.ts';
import { COMMAND_KINDS, kindNamesOf } from '../domain/commandKinds.ts';
import { describeZodIssues } from '../domain/errors.ts';
import { findUnstorable } from '../domain/storableValue.ts';
import { stateFilterOf } from '../read/stateFilter.ts';
import { DRIVERS } from '../drivers/registry.ts';
import { DURATION_UNITS_MS } from '../domain/durations.ts';
import { type PreemptionSettings, PreemptionSettingsSchema } from '../domain/preemption.ts';

/**
 * Every command-line value, validated by a zod schema. `parseWith` makes one
 * a commander argument parser, so a bad value becomes commander's one-line
 * usage error naming the option, before anything is opened or written.
 */
export function parseWith<T>(schema: z.ZodType<T>): (value: string) => T {
  return (value) => {
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw new InvalidArgumentError(describeZodIssues(parsed.error.issues));
    // JSON read from an argument can hold what PostgreSQL cannot store (a "\u0000" escape) or nest too deep.
    const unstorable = findUnstorable(parsed.data);
    if (unstorable) throw new InvalidArgumentError(describeZodIssues([unstorable]));
    return parsed.data;
  };
}

const wholeNumber = z.string().regex(/^\d+$/, 'expected a whole number').transform(Number);

export const PositiveId = wholeNumber.pipe(z.number().int().min(1, 'expected an id of 1 or more').max(Number.MAX_SAFE_INTEGER));

export const countBetween = (min: number, max: number) =>
  wholeNumber.pipe(z.number().min(min, `expected at least ${min}`).max(max, `expected at most ${max}`));

export const Seconds = z
  .string()
  .regex(/^\d+(\.\d+)?$/, 'expected a number of seconds')
  .transform(Number)
  .pipe(z.number().positive('expected more than 0 seconds').max(86_400, 'expected at most 86400 seconds'));

/** "90s", "30m", "2h", "1d", or combined like "1h30m"; in milliseconds. */
export const Duration = z
  .string()
  .regex(/^(\d+[smhd])+$/, 'expected a duration like 90s, 30m, 2h, 1d or 1h30m')
  .transform((text) =>
    [...text.matchAll(/(\d+)([smhd])/g)].reduce((ms, [, n, unit]) => ms + Number(n) * DURATION_UNITS_MS[unit as keyof typeof DURATION_UNITS_MS], 0),
  )
  .pipe(
    z
      .number()
      .positive('expected a duration longer than 0')
      .max(366 * DURATION_UNITS_MS.d, 'expected at most 366 days'),
  );

/** `on` or `off`. */
export const OnOff = z.enum(['on', 'off'], { error: 'expected on or off' }).transform((value) => value === 'on');

/** A duration, or `off` (kept as the word: commander turns an option's null into an empty string). */
export const DurationOrOff = z.union([z.literal('off'), Duration]);

/**
 * A moment for a reservation's window, as ISO 8601 text: `now`, `+<duration>`
 * from now (`+2h`), or an ISO 8601 time with its offset, as given.
 */
export const WindowTime = z.union([
  z.literal('now').transform(() => new Date().toISOString()),
  z
    .string()
    .regex(/^\+/, 'expected now, +<duration> (e.g. +2h) or an ISO 8601 time with its offset, e.g. 2030-01-01T18:00:00Z')
    .transform((text) => text.slice(1))
    .pipe(Duration)
    .transform((ms) => new Date(Date.now() + ms).toISOString()),
  z.iso.datetime({ offset: true, message: 'expected now, +<duration> (e.g. +2h) or an ISO 8601 time with its offset, e.g. 2030-01-01T18:00:00Z' }),
]);

/** The CLI's names of a blueprint's preemption settings (domain/preemption.ts), each read from its text. */
const PREEMPTION_KEYS = {
  margin: ['priorityMargin', z.coerce.number()],
  'min-runtime': ['minRuntimeMs', Duration],
  grace: ['graceMs', Duration],
  protected: ['protectedPerTeam', z.coerce.number()],
} as const;

/**
 * `--preemption margin=3,min-runtime=10m,grace=2m,protected=1` (each
 * optional; the others take their defaults), `on` for all the defaults, or
 * `off` (the API's null).
 */
export const PreemptionArg = z.string().transform((text, ctx): PreemptionSettings | 'off' => {
  if (text === 'off') return 'off';
  const settings: Record<string, unknown> = {};
  if (text !== 'on') {
    for (const pair of text.split(',')) {
      const [key = '', value, ...more] = pair.split('=');
      const known = PREEMPTION_KEYS[key as keyof typeof PREEMPTION_KEYS];
      if (!known || value === undefined || more.length > 0) {
        ctx.addIssue({
          code: 'custom',
          message: `${known ? `expected ${key}=<value>` : `unknown preemption setting ${key}`}: expected on, off, or key=value pairs of ${Object.keys(PREEMPTION_KEYS).join(', ')} (e.g. margin=3,grace=2m)`,
        });
        return z.NEVER;
      }
      const parsed = known[1].safeParse(value);
      if (!parsed.success) {
        ctx.addIssue({ code: 'custom', message: `${key}: ${describeZodIssues(parsed.error.issues)}` });
        return z.NEVER;
      }
      settings[known[0]] = parsed.data;
    }
  }
  const checked = PreemptionSettingsSchema.safeParse(settings);
  if (checked.success) return checked.data;
  ctx.addIssue({ code: 'custom', message: describeZodIssues(checked.error.issues) });
  return z.NEVER;
});

export const textUpTo = (max: number) => z.string().trim().min(1, 'expected some text').max(max, `expected at most ${max} characters`);

export const DriverName = z.enum(Object.keys(DRIVERS) as [string, ...string[]]);

export const LeaseStateArg = stateFilterOf('lease');
export const ResourceStateArg = stateFilterOf('resource');
export const BlueprintStateArg = stateFilterOf('blueprint');
export const CommandStatusArg = z.enum(['queued', 'running', 'done', 'failed', 'cancelled', 'coalesced'] satisfies CommandStatus[]);
const kindNames = (Object.keys(COMMAND_KINDS) as ObjectKind[]).map(kindNamesOf);
/** Every kind's name, an old one too (older commands are stored under it); an error lists the current names only. */
const currentKinds = [...new Set(kindNames.flatMap((names) => names.current))];
export const CommandKindArg = z.enum(
  [...new Set([...currentKinds, ...kindNames.flatMap((names) => Object.keys(names.old))])] as [string, ...string[]],
  {
    error: () => `expected a command kind: ${currentKinds.join(', ')}`,
  },
);

/** A JSON object, e.g. driver settings. */
export const JsonObject = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'expected JSON' });
      return z.NEVER;
    }
  })
  .pipe(z.record(z.string(), z.unknown(), 'expected a JSON object'));

/**
 * "key=value": the value is read as JSON when it is JSON (numbers, booleans,
 * objects), else taken as a string, so `root=/tmp/x` needs no quoting.
 */
/** `key=value`, a label as the CLI takes it (checked as a label with the blueprint or lease it is for). */
export const LabelArg = z
  .string()
  .regex(/^[^=]+=/, 'expected key=value, e.g. gpu=a100')
  .transform((text): [string, string] => [text.slice(0, text.indexOf('=')), text.slice(text.indexOf('=') + 1)]);

export const Setting = z
  .string()
  .regex(/^[A-Za-z_][\w]*=/, 'expected key=value')
  .transform((text): [string, unknown] => {
    const at = text.indexOf('=');
    const raw = text.slice(at + 1);
    return [text.slice(0, at), readJsonOr(raw)];
  });

function readJsonOr(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}
