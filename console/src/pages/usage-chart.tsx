/** The usage page's chart: a summary's buckets as stacked bars, one series per key, its axes in the theme's colours. */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import type { UsageBucketDto, UsageSummaryDto } from '../api.js';

export type Metric = 'cost' | 'calls' | 'failedCalls' | 'refusedCalls' | 'units' | 'tokens' | 'inputTokens' | 'outputTokens' | KindMetric;
/** The kinds beyond text tokens (docs/pricing.md, "Kinds"): offered where the summary has some. */
export type KindMetric = 'audioTokens' | 'imageTokens' | 'images' | 'audioSeconds' | 'characters';
export const KIND_METRICS: KindMetric[] = ['audioTokens', 'imageTokens', 'images', 'audioSeconds', 'characters'];
/** The call counts a bucket carries on a Nexus that counts calls; read defensively, as an older one has none. */
export type CallCount = 'calls' | 'failedCalls' | 'refusedCalls';
export const CALL_COUNTS: CallCount[] = ['calls', 'failedCalls', 'refusedCalls'];

export const METRICS: Record<Metric, string> = {
  cost: 'Spend',
  calls: 'Calls',
  failedCalls: 'Errors (failed calls)',
  refusedCalls: 'Refused calls',
  units: 'Units',
  tokens: 'Tokens (input + output)',
  inputTokens: 'Input tokens',
  outputTokens: 'Output tokens',
  audioTokens: 'Audio tokens (input + output)',
  imageTokens: 'Image tokens (input + output)',
  images: 'Images',
  audioSeconds: 'Seconds of audio',
  characters: 'Characters',
};

/** A bucket's value of a kind's metric (0 where it has none). */
export function kindOf(b: UsageBucketDto, metric: KindMetric): number {
  const n = (v: string | undefined) => Number(v ?? 0);
  switch (metric) {
    case 'audioTokens':
      return n(b.audioInputTokens) + n(b.audioOutputTokens);
    case 'imageTokens':
      return n(b.imageInputTokens) + n(b.imageOutputTokens);
    case 'images':
      return n(b.images);
    case 'audioSeconds':
      return n(b.audioMs) / 1000;
    case 'characters':
      return n(b.characters);
  }
}

/** A bucket's call count (`calls`, `failedCalls`, `refusedCalls`), a number or a decimal string; undefined where the API has none. */
export function countOf(b: UsageBucketDto, field: CallCount): bigint | undefined {
  const v = (b as unknown as Record<string, unknown>)[field];
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^\d+$/.test(v)) return BigInt(v);
  return undefined;
}

/**
 * Ten colours told apart in light and dark, also by most colour-blind eyes (Tableau 10's hues, darkened for a white
 * card; grey last, for "Other"): the chart draws the nine largest series and "Other", never two of one colour.
 */
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#bcbd22', '#17becf', '#7f7f7f'];

/** The series drawn, and the columns of the table under the chart: the largest keys, the others summed as one. */
export const TOP_SERIES = COLORS.length - 1;

/** The key of the series that sums the keys beyond the largest (no key of the API is empty-prefixed by NUL). */
export const OTHER = '\u0000other';

function metricOf(b: UsageBucketDto, metric: Metric): number {
  switch (metric) {
    case 'cost':
      return Number(b.costMicros ?? 0);
    case 'calls':
    case 'failedCalls':
    case 'refusedCalls':
      return Number(countOf(b, metric) ?? 0n);
    case 'tokens':
      return Number(b.inputTokens) + Number(b.outputTokens);
    case 'units':
    case 'inputTokens':
    case 'outputTokens':
      return Number(b[metric]);
    case 'audioTokens':
    case 'imageTokens':
    case 'images':
    case 'audioSeconds':
    case 'characters':
      return kindOf(b, metric);
  }
}

/**
 * The buckets as series: every bucket start of the range (seconds; the API leaves out the buckets without events,
 * counted here as zeros), then one row of values per key, the largest first (by the metric over the range); past
 * `top`, the smaller keys are summed as one series, OTHER.
 */
export function seriesOf(
  summary: UsageSummaryDto,
  metric: Metric,
  top = TOP_SERIES,
): { keys: string[]; starts: number[]; rows: number[][] } {
  const since = Date.parse(summary.since);
  const until = Date.parse(summary.until);
  const found = new Set(summary.buckets.map((b) => Date.parse(b.start) / 1000));
  if (summary.granularity === 'hour') {
    for (let s = Math.floor(since / HOUR_MS) * HOUR_MS; s < until; s += HOUR_MS) found.add(s / 1000);
  } else {
    // A day is 23 to 25 hours long: 36 hours after a day's start is always in the next day.
    const zone = dayZone(summary);
    for (let s = localDayStart(since, zone); s < until; s = localDayStart(s + 36 * HOUR_MS, zone)) found.add(s / 1000);
  }
  const starts = [...found].sort((a, b) => a - b);
  const totals = new Map<string, number>();
  for (const b of summary.buckets) totals.set(b.key, (totals.get(b.key) ?? 0) + metricOf(b, metric));
  // "Other" (the API's, asked with `top`) is last, whatever its size.
  const ranked = [...totals]
    .sort(([ka, a], [kb, b]) => (ka === OTHER ? 1 : kb === OTHER ? -1 : b - a || ka.localeCompare(kb)))
    .map(([k]) => k);
  const keys = ranked.length > top + 1 ? [...ranked.slice(0, top), OTHER] : ranked;
  const index = new Map(keys.map((k, i) => [k, i]));
  const at = new Map(starts.map((s, i) => [s, i]));
  const rows = keys.map(() => starts.map(() => 0));
  for (const b of summary.buckets) {
    const row = rows[index.get(b.key) ?? keys.length - 1]!;
    const i = at.get(Date.parse(b.start) / 1000)!;
    row[i] = (row[i] ?? 0) + metricOf(b, metric);
  }
  return { keys, starts, rows };
}

/** The operator's time zone, as the browser reports it. */
export const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone;

/** The zone whose days the API summed (a Nexus that does not say sums UTC days). */
export const dayZone = (summary: UsageSummaryDto) => (summary as { timeZone?: string }).timeZone ?? 'UTC';

/**
 * What the x axis is in: hours in the operator's time zone; days in the zone the API summed them in (the
 * operator's, asked for), so a day is labelled as the day it is (never as "1:00am" of the day before).
 */
export const axisZone = (summary: UsageSummaryDto) => (summary.granularity === 'day' ? dayZone(summary) : localZone());

const HOUR_MS = 3_600_000;

/** The start of the day in `zone` that the instant `ms` falls in: its local midnight. */
function localDayStart(ms: number, zone: string): number {
  const clock = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
  const sinceMidnight = (t: number) => {
    const p = Object.fromEntries(clock.formatToParts(t).map((x) => [x.type, Number(x.value)]));
    return ((p.hour ?? 0) * 3600 + (p.minute ?? 0) * 60 + (p.second ?? 0)) * 1000 + (t % 1000);
  };
  const midnight = ms - sinceMidnight(ms);
  // A day whose offset changed before `ms` (daylight saving time): one more step to its midnight.
  const off = sinceMidnight(midnight);
  return off === 0 ? midnight : midnight - (off > 12 * HOUR_MS ? off - 24 * HOUR_MS : off);
}

/**
 * Each bucket is a bar (a bucket is a sum over its hour or day; a line between two would invent a ramp), the
 * keys stacked: a series is drawn at its running total, the tallest first, and its legend reads its own value.
 */
export function Chart(props: {
  summary: UsageSummaryDto;
  metric: Metric;
  labelOf: (key: string) => string;
  format: (v: number) => string;
}) {
  const { summary, metric, labelOf, format } = props;
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!box.current || summary.buckets.length === 0) return;
    const { keys, starts, rows: raw } = seriesOf(summary, metric);
    const stacked = raw.map((_, i) => raw[0]!.map((__, j) => raw.slice(0, i + 1).reduce((sum, row) => sum + row[j]!, 0)));
    const order = keys.map((_, i) => keys.length - 1 - i);
    const zone = axisZone(summary);
    const bars = uPlot.paths.bars!({ size: [0.8, 48], align: 0 });
    const step = summary.granularity === 'hour' ? 3600 : 86_400;
    const axis = summary.granularity === 'day' ? `Day (${zone})` : `Hour (${zone})`;
    // The axes in the card's text and line colours, read again when the theme changes (uPlot draws them on a canvas,
    // which no stylesheet reaches).
    const card = box.current;
    const inkOf = () => {
      const style = getComputedStyle(card);
      return { text: style.color, line: style.borderTopColor };
    };
    let ink = inkOf();
    const inked = { stroke: () => ink.text, grid: { stroke: () => ink.line }, ticks: { stroke: () => ink.line } };
    const plot = new uPlot(
      {
        width: Math.max(280, box.current.clientWidth - 16),
        height: 320,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), zone),
        scales: { x: { time: true, range: () => [starts[0]! - step / 2, starts[starts.length - 1]! + step / 2] } },
        axes: [
          { label: axis, ...inked },
          {
            ...inked,
            label: metric === 'cost' ? `Spend (${summary.currency})` : METRICS[metric],
            size: 90,
            values: (_u, splits) => splits.map(format),
          },
        ],
        series: [
          { label: axis },
          ...order.map((k) => ({
            label: labelOf(keys[k]!) || '(none)',
            stroke: COLORS[k % COLORS.length],
            fill: COLORS[k % COLORS.length],
            width: 1,
            paths: bars,
            points: { show: false },
            value: (_u: uPlot, _v: number | null, _s: number, idx: number | null) => (idx === null ? '—' : format(raw[k]![idx]!)),
          })),
        ],
      },
      [starts, ...order.map((k) => stacked[k]!)],
      box.current,
    );
    // As wide as its card, also when the window is resized (a phone turned, a window narrowed).
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(280, card.clientWidth - 16), height: 320 }));
    resize.observe(card);
    // The theme: the system's scheme, or the one the operator chose (the Theme button sets data-theme).
    const themed = () => {
      ink = inkOf();
      plot.redraw(false);
    };
    const system = window.matchMedia('(prefers-color-scheme: dark)');
    system.addEventListener('change', themed);
    const chosen = new MutationObserver(themed);
    chosen.observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
    return () => {
      resize.disconnect();
      system.removeEventListener('change', themed);
      chosen.disconnect();
      plot.destroy();
    };
    // Drawn again when a key's name arrives (a user's external id is read after the summary).
  }, [summary, metric, [...new Set(summary.buckets.map((b) => b.key))].map(labelOf).join('\n')]);
  return <div class="chart" ref={box} data-testid="usage-chart" data-draw="bars" data-zone={axisZone(summary)} />;
}
