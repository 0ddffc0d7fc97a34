/**
 * Prometheus's text exposition format (what prom-client writes), read back
 * for assertions: each family's HELP and TYPE, and its samples.
 */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  help?: string;
  type?: string;
}

export interface Scraped {
  readonly families: ReadonlyMap<string, Family>;
  readonly samples: readonly Sample[];
}

const SAMPLE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)",?/g;

export function parsePromText(text: string): Scraped {
  const families = new Map<string, Family>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (meta) {
      const family = families.get(meta[2]!) ?? {};
      if (meta[1] === 'HELP') family.help = meta[3];
      else family.type = meta[3];
      families.set(meta[2]!, family);
      continue;
    }
    const sample = SAMPLE.exec(line);
    if (!sample) throw new Error(`not a Prometheus text line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (sample[2] ?? '').matchAll(LABEL)) {
      labels[name!] = value!.replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
    }
    samples.push({ name: sample[1]!, labels, value: Number(sample[3]) });
  }
  return { families, samples };
}

/** The sum of the samples named `name` whose labels include `labels`. */
export function total(scraped: Scraped, name: string, labels: Record<string, string> = {}): number {
  return scraped.samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** Each distinct combination of the given labels among the samples named `name`, with its summed value, as "a,b" → value. */
export function byLabels(scraped: Scraped, name: string, labelNames: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of scraped.samples.filter((s) => s.name === name)) {
    const key = labelNames.map((l) => s.labels[l] ?? '').join(',');
    out[key] = (out[key] ?? 0) + s.value;
  }
  return out;
}

/**
 * The `slipway_…` metric names in PromQL text (alert rules, a dashboard's
 * expressions) that `scraped` does not have: a name must be a family, or a
 * histogram family's `_bucket`, `_sum` or `_count` series.
 */
export function unknownMetrics(scraped: Scraped, promql: string): string[] {
  const names = new Set(promql.match(/\bslipway_[a-z0-9_]+/g));
  const known = (name: string) => {
    if (scraped.families.has(name)) return true;
    const histogram = /^(.*)_(bucket|sum|count)$/.exec(name)?.[1];
    return histogram !== undefined && scraped.families.get(histogram)?.type === 'histogram';
  };
  return [...names].filter((name) => !known(name));
}
