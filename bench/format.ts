import type { Throughput } from './measure.ts';

/** How the report and the bars write numbers. */
export const integer = (value: number) => new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 }).format(value);
export const perSecond = (t: Throughput) => `${integer(t.perSecond)} /s`;
/** Milliseconds: a decimal below 10, whole above. */
const millis = (value: number) => (value < 10 ? value.toFixed(1) : integer(value));
export const ms = (value: number) => `${millis(value)} ms`;
export const pair = (l: { p50Ms: number; p99Ms: number }) => `${millis(l.p50Ms)} / ${millis(l.p99Ms)} ms`;
export const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
/** value / of, with about three significant digits. */
export const times = (value: number, of: number) => {
  const r = value / of;
  return r.toFixed(r < 10 ? 2 : r < 100 ? 1 : 0);
};
