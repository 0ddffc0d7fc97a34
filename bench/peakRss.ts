/**
 * The highest resident set size of this process seen since the last take(),
 * sampled every 100 ms: a worker process's memory figure, its own and not
 * the benchmark's.
 */
export class PeakRss {
  private peak = 0;

  constructor() {
    setInterval(() => this.sample(), 100).unref();
  }

  take(): number {
    this.sample();
    const peak = this.peak;
    this.peak = 0;
    return peak;
  }

  private sample(): void {
    this.peak = Math.max(this.peak, process.memoryUsage.rss());
  }
}
