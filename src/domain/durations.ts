/** The units of a duration as the CLI takes it and Slipway writes it ("1h30m"), in milliseconds. */
export const DURATION_UNITS_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000 } as const;

/**
 * A duration the way it is given (`--idle-timeout 15m`): "15m", "1h30m",
 * "30s", "1d2h", with a part of a second on the seconds ("1.5s") or alone
 * ("250ms"). Messages, views and pages write durations so, not as "900 s"
 * or "30000 ms".
 */
export function formatDuration(ms: number): string {
  let left = Math.round(ms);
  if (left < 1000) return `${left}ms`;
  let text = '';
  for (const [unit, size] of Object.entries(DURATION_UNITS_MS)) {
    // Seconds keep their fraction: they are the last unit.
    const count = unit === 's' ? left / size : Math.floor(left / size);
    if (count > 0) text += `${count}${unit}`;
    left -= Math.floor(count) * size;
  }
  return text;
}
