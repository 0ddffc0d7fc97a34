/** The fewest and most slots of a blueprint's live resources. */
export interface SlotRange {
  readonly min: number;
  readonly max: number;
}

/**
 * How many leases each resource of a blueprint takes, in words: its
 * `leasesPerResource` ("2"), or, where the driver decides each resource's
 * slots (a static pool's entries), what its live resources have ("2–4"),
 * so a pool of 4- and 2-slot entries is not shown as "1". `briefly`: the
 * number or range alone, for a list's cell.
 */
export function describeSlotsPerResource(leasesPerResource: number, live: SlotRange | null | undefined, briefly = false): string {
  if (!live || (live.min === leasesPerResource && live.max === leasesPerResource)) return String(leasesPerResource);
  const range = live.min === live.max ? String(live.min) : `${live.min}–${live.max}`;
  return briefly ? range : `${range} (as its driver made each live resource; ${leasesPerResource} where the driver does not say)`;
}
