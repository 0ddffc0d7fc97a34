import { z } from 'zod';
import { LIST_ORDERS } from '../read/listOrder.ts';
import type { ObjectKind } from '../../migrations/schema.ts';

/**
 * The request parts several routes share. Path and query values arrive as
 * text, so numbers are parsed from digits here (and only digits: "1e3",
 * "0x10" or "-1" are refused, naming the field).
 */
const digits = (what: string) =>
  z
    .string()
    .regex(/^\d{1,15}$/, `expected ${what} (a whole number)`)
    .transform(Number);

export const Id = digits('an id').pipe(z.number().int().min(1, 'expected an id of 1 or more'));

export const IdParams = z.object({ id: Id.meta({ description: "the object's id" }) }).strict();

/** A blueprint's id (digits) or its name: the API's, the web UI's and the CLI's. */
export const BlueprintRef = z
  .string()
  .min(1)
  .max(63)
  .refine((text) => !/^\d{16,}$/.test(text), 'expected a blueprint name, or an id of at most 15 digits')
  .transform((text) => (/^\d+$/.test(text) ? Number(text) : text));

/** The largest id a JSON body may give: ids are bigint identities read as JS numbers (see src/db/Database.ts). */
export const NumericId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER, 'expected an id of at most 2^53 - 1');

/** `<kind>:<id>` of an object, e.g. `lease:12`: the target filter of command lists. */
export const TargetRef = z
  .string()
  .regex(/^(lease|resource|blueprint):[1-9]\d{0,14}$/, 'expected <kind>:<id>, e.g. lease:12')
  .transform((text) => {
    const [kind, id] = text.split(':') as [ObjectKind, string];
    return { kind, id: Number(id) };
  });

export const BlueprintParams = z.object({ ref: BlueprintRef.meta({ description: "the blueprint's id or name" }) }).strict();

/** `?limit=&after=`: keyset pages; `after` is the `next` of the previous page. */
export const PageQuery = {
  limit: digits('a page size').pipe(z.number().int().min(1).max(1000)).default(50).meta({ description: 'rows per page (1-1000)' }),
  after: Id.optional().meta({ description: 'the `next` of the previous page' }),
  order: z.enum(LIST_ORDERS).default('oldest').meta({ description: 'oldest first (the default) or newest first' }),
};

/** The longest `?wait=`, in seconds. */
export const MAX_WAIT_S = 60;

/** `?wait=<seconds>`: hold the answer until the command tree settles, or this long. */
export const WaitQuery = z
  .object({
    wait: z
      .string()
      .regex(/^\d+(\.\d+)?$/, 'expected a number of seconds')
      .transform(Number)
      .pipe(z.number().max(MAX_WAIT_S, `expected at most ${MAX_WAIT_S} seconds`))
      .optional()
      .meta({ description: `hold the answer until the work has settled, or this many seconds (at most ${MAX_WAIT_S})` }),
  })
  .strict();

/** A lease request's query: `wait`, or `dryRun` (which answers at once, and writes nothing). */
export const CreateLeaseQuery = WaitQuery.extend({
  dryRun: z
    .enum(['true', 'false'])
    .transform((value) => value === 'true')
    .optional()
    .meta({ description: 'true: request nothing; answer whether the lease would be granted now, where, or why not (an Explanation)' }),
})
  .strict()
  .refine((query) => !(query.dryRun && query.wait !== undefined), {
    message: 'a dry run answers at once: give wait or dryRun, not both',
    path: ['wait'],
  });

export const Reason = z.string().trim().min(1).max(1000);
