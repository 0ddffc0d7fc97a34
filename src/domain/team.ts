import { z } from 'zod';

/**
 * A team's name and weight (docs/scheduling.md): every token belongs to a
 * team, and every lease to its requester's. The team `default` (made by
 * migration 0027) holds whoever was not put in another. Kept apart from
 * objects/teams.ts, which changes teams, so that the CLI's option parsers
 * load no database code.
 */
export const DEFAULT_TEAM = 'default';

export const TeamNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'use 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit');

export const WeightSchema = z.number().int().min(1, 'expected a weight of 1 to 1000').max(1000, 'expected a weight of 1 to 1000');
