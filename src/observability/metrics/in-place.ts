/**
 * Counters and histograms whose series are plain objects the caller keeps and updates in place (no label hashing
 * per update), registered with prom-client's registry as custom metrics and read at scrape time: the gateway's
 * per-call figures (call-metrics.ts).
 */
import type { Registry } from 'prom-client';

export type Labels = Record<string, string>;

/** A counter series updated in place. */
export interface CounterSeries {
  labels: Labels;
  value: number;
}

/** A histogram series updated in place: its observations per bucket (the last: above every bound), sum and count. */
export interface HistogramSeries {
  labels: Labels;
  counts: Float64Array;
  sum: number;
  count: number;
}

/** What prom-client's registry reads of a metric at scrape time (its get()). */
interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/**
 * A counter whose series are plain objects the caller keeps and increments; registered with prom-client's
 * registry as a custom metric (name, help, type, get(), reset()), rendered like its own.
 */
export class InPlaceCounter {
  readonly type = 'counter';
  readonly aggregator = 'sum';
  private readonly series: CounterSeries[] = [];

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
  ) {
    registry.registerMetric(this as never);
  }

  child(labels: Labels): CounterSeries {
    const series = { labels, value: 0 };
    this.series.push(series);
    return series;
  }

  get() {
    const values: MetricValue[] = this.series.map((s) => ({ labels: s.labels, value: s.value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const s of this.series) s.value = 0;
  }
}

/** A histogram in the same way (cumulative buckets, _sum and _count, as Prometheus reads them). */
export class InPlaceHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series: HistogramSeries[] = [];

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    readonly bounds: readonly number[],
  ) {
    registry.registerMetric(this as never);
  }

  child(labels: Labels): HistogramSeries {
    const series = { labels, counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
    this.series.push(series);
    return series;
  }

  observe(series: HistogramSeries, value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    series.counts[i]!++;
    series.sum += value;
    series.count++;
  }

  get() {
    const values: MetricValue[] = [];
    for (const s of this.series) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        values.push({
          labels: { le: i < this.bounds.length ? this.bounds[i]! : '+Inf', ...s.labels },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        });
      }
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const s of this.series) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}
