import type { BlueprintRow } from '../../migrations/schema.ts';
import { describeZodIssues, InvalidInputError } from '../domain/errors.ts';
import { DirectoryDriver } from './DirectoryDriver.ts';
import type { Driver, DriverFactory, DriverServices } from './Driver.ts';
import { ExecDriver } from './ExecDriver.ts';
import { SimulatedDriver } from './SimulatedDriver.ts';
import { StaticPoolDriver } from './StaticPoolDriver.ts';

/** Every driver Slipway ships, by the name a blueprint uses. */
// biome-ignore lint/suspicious/noExplicitAny: each driver's settings have their own type, parsed by its own settingsSchema
export const DRIVERS: Readonly<Record<string, DriverFactory<any>>> = {
  [DirectoryDriver.name]: DirectoryDriver,
  [SimulatedDriver.name]: SimulatedDriver,
  [ExecDriver.name]: ExecDriver,
  [StaticPoolDriver.name]: StaticPoolDriver,
};

export function driverFactory(name: string): DriverFactory<unknown> {
  const found = DRIVERS[name];
  if (!found) {
    throw new InvalidInputError(`unknown driver "${name}"; use one of: ${Object.keys(DRIVERS).join(', ')}`, {
      field: 'driver',
    });
  }
  return found;
}

/** Checks a blueprint's settings against its driver's schema; returns them with defaults filled in (for use, never for storing: see createBlueprint). */
export function validateDriverSettings(driver: string, settings: unknown): unknown {
  const parsed = driverFactory(driver).settingsSchema.safeParse(settings ?? {});
  if (!parsed.success) {
    throw new InvalidInputError(`invalid settings for the ${driver} driver: ${describeZodIssues(parsed.error.issues, 'settings')}`, {
      field: 'settings',
    });
  }
  return parsed.data;
}

/**
 * A blueprint's `possible_labels` for its driver and settings (checked), as
 * stored with them: every set of labels the driver may report, or null
 * where its program decides them (DriverFactory.possibleLabels).
 */
export function possibleLabelsColumn(driver: string, settings: unknown): string | null {
  const possible = driverFactory(driver).possibleLabels?.(settings);
  return possible === undefined ? null : JSON.stringify(possible);
}

/**
 * Makes drivers for blueprints, one per blueprint version, so a settings
 * change takes effect on the next command without restarting workers.
 */
export class DriverRegistry {
  private readonly cache = new Map<string, Driver>();

  constructor(private readonly services: DriverServices) {}

  forBlueprint(blueprint: Pick<BlueprintRow, 'id' | 'version' | 'driver' | 'settings'>): Driver {
    const key = `${blueprint.id}:${blueprint.version}`;
    let driver = this.cache.get(key);
    if (!driver) {
      const chosen = driverFactory(blueprint.driver);
      driver = chosen.create(validateDriverSettings(blueprint.driver, blueprint.settings), this.services);
      this.cache.set(key, driver);
    }
    return driver;
  }
}
