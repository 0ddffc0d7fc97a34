import { z } from 'zod';

/**
 * What the collector does with an orphan (something a blueprint's driver
 * lists that no resource stands for), by the blueprint's `orphans` setting,
 * as data: each value and what it means, in words for people.
 */
export const ORPHANS_SETTINGS = {
  report: 'reported (API, CLI, web UI, metric), left alone',
  destroy: 'reported, and destroyed through the driver once unmatched in two passes for longer than the grace',
} as const;
export type OrphansSetting = keyof typeof ORPHANS_SETTINGS;

export const OrphansSettingSchema = z.enum(Object.keys(ORPHANS_SETTINGS) as [OrphansSetting, ...OrphansSetting[]], {
  error: `expected one of: ${Object.keys(ORPHANS_SETTINGS).join(', ')}`,
});
