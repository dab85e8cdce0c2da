import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { getUsageSummary, listProviderConnections, type UsageSummaryDto } from '../api.js';
import type { PageProps } from '../main.js';
import { Empty, ErrorNote, Field, formatNumber, useAccessNames, useAction, valueOf, Working } from '../ui.js';

type Granularity = 'hour' | 'day';
type GroupBy = 'model' | 'access' | 'connection';
type Metric = 'units' | 'tokens' | 'inputTokens' | 'outputTokens';

const RANGES: Record<string, { label: string; ms: number; granularity: Granularity }> = {
  '24h': { label: 'Last 24 hours', ms: 86_400_000, granularity: 'hour' },
  '7d': { label: 'Last 7 days', ms: 7 * 86_400_000, granularity: 'hour' },
  '30d': { label: 'Last 30 days', ms: 30 * 86_400_000, granularity: 'day' },
  '365d': { label: 'Last 365 days', ms: 365 * 86_400_000, granularity: 'day' },
};
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

const metricOf = (b: UsageSummaryDto['buckets'][number], metric: Metric): number =>
  metric === 'units' ? Number(b.units) : metric === 'tokens' ? Number(b.inputTokens) + Number(b.outputTokens) : Number(b[metric]);

/**
 * The buckets as uPlot's columns: every bucket start of the range (seconds; the API leaves out the
 * buckets without events, drawn here as zeros), then one series per key.
 */
function columns(summary: UsageSummaryDto, metric: Metric): { keys: string[]; data: uPlot.AlignedData } {
  const step = summary.granularity === 'hour' ? 3600 : 86_400;
  const first = Math.floor(Date.parse(summary.since) / 1000 / step) * step;
  const starts: number[] = [];
  for (let s = first; s < Date.parse(summary.until) / 1000; s += step) starts.push(s);
  const keys = [...new Set(summary.buckets.map((b) => b.key))].sort();
  const at = new Map(starts.map((s, i) => [s, i]));
  const series = keys.map(() => starts.map(() => 0));
  for (const b of summary.buckets) {
    const row = series[keys.indexOf(b.key)]!;
    const i = at.get(Date.parse(b.start) / 1000)!;
    row[i] = (row[i] ?? 0) + metricOf(b, metric);
  }
  return { keys, data: [starts, ...series] };
}

/** The operator's time zone, as the browser reports it. */
const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone;

/**
 * What the x axis is in: hours in the operator's time zone; days as the API sums them, from UTC midnight
 * to UTC midnight, so a day is labelled as the UTC day it is (never as "1:00am" of the day before).
 */
const axisZone = (granularity: string) => (granularity === 'day' ? 'UTC' : localZone());

/**
 * Each bucket is a bar (a bucket is a sum over its hour or day; a line between two would invent a ramp), the
 * keys stacked: a series is drawn at its running total, the tallest first, and its legend reads its own value.
 */
function Chart({ summary, metric, labelOf }: { summary: UsageSummaryDto; metric: Metric; labelOf: (key: string) => string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!box.current || summary.buckets.length === 0) return;
    const { keys, data } = columns(summary, metric);
    const raw = data.slice(1) as number[][];
    const stacked = raw.map((_, i) => raw[0]!.map((__, j) => raw.slice(0, i + 1).reduce((sum, row) => sum + row[j]!, 0)));
    const order = keys.map((_, i) => keys.length - 1 - i);
    const zone = axisZone(summary.granularity);
    const bars = uPlot.paths.bars!({ size: [0.8, 48], align: 0 });
    const step = summary.granularity === 'hour' ? 3600 : 86_400;
    const starts = data[0] as number[];
    const plot = new uPlot(
      {
        width: Math.max(280, box.current.clientWidth - 16),
        height: 320,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), zone),
        scales: { x: { time: true, range: () => [starts[0]! - step / 2, starts[starts.length - 1]! + step / 2] } },
        axes: [
          { label: summary.granularity === 'day' ? 'Day (UTC)' : `Hour (${zone})` },
          {
            label: metric === 'units' ? 'units' : 'tokens',
            size: 80,
            values: (_u, splits) => splits.map((v) => formatNumber(v)),
          },
        ],
        series: [
          { label: summary.granularity === 'day' ? 'Day (UTC)' : `Hour (${zone})` },
          ...order.map((k) => ({
            label: labelOf(keys[k]!) || '(none)',
            stroke: COLORS[k % COLORS.length],
            fill: COLORS[k % COLORS.length],
            width: 1,
            paths: bars,
            points: { show: false },
            value: (_u: uPlot, _v: number | null, _s: number, idx: number | null) => (idx === null ? '—' : formatNumber(raw[k]![idx])),
          })),
        ],
      },
      [starts, ...order.map((k) => stacked[k]!)],
      box.current,
    );
    // As wide as its card, also when the window is resized (a phone turned, a window narrowed).
    const card = box.current;
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(280, card.clientWidth - 16), height: 320 }));
    resize.observe(card);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
    // Drawn again when a key's name arrives (a user's external id is read after the summary).
  }, [summary, metric, [...new Set(summary.buckets.map((b) => b.key))].map(labelOf).join('\n')]);
  return <div class="chart" ref={box} data-testid="usage-chart" data-draw="bars" data-zone={axisZone(summary.granularity)} />;
}

export function UsagePage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [range, setRange] = useState('24h');
  const [granularity, setGranularity] = useState<Granularity>('hour');
  const [groupBy, setGroupBy] = useState<GroupBy>('model');
  const [metric, setMetric] = useState<Metric>('units');
  const [summary, setSummary] = useState<UsageSummaryDto | undefined>();
  const [names, setNames] = useState<Record<string, string>>({});
  const action = useAction();

  useEffect(() => {
    listProviderConnections({ client, path: { workspaceId }, query: { limit: 100 } })
      .then((p) => setNames(Object.fromEntries(p.data.map((c) => [c.id, c.name]))))
      .catch(() => setNames({}));
  }, [workspaceId]);

  useEffect(() => {
    const chosen = RANGES[range]!;
    const until = new Date();
    const since = new Date(until.getTime() - chosen.ms);
    void action.run('Summing usage…', async () =>
      setSummary(
        (
          await getUsageSummary({
            client,
            path: { workspaceId },
            query: { since: since.toISOString(), until: until.toISOString(), granularity, groupBy },
          })
        ).data,
      ),
    );
  }, [workspaceId, range, granularity, groupBy]);

  const users = useAccessNames(client, groupBy === 'access' ? (summary?.buckets.map((b) => b.key).filter(Boolean) ?? []) : []);
  const labelOf = (key: string) => names[key] ?? users[key] ?? key;
  const totals = new Map<string, { units: bigint; input: bigint; output: bigint; events: number }>();
  for (const b of summary?.buckets ?? []) {
    const t = totals.get(b.key) ?? { units: 0n, input: 0n, output: 0n, events: 0 };
    totals.set(b.key, {
      units: t.units + BigInt(b.units),
      input: t.input + BigInt(b.inputTokens),
      output: t.output + BigInt(b.outputTokens),
      events: t.events + b.events,
    });
  }

  const sum = { units: 0n, input: 0n, output: 0n, events: 0 };
  for (const t of totals.values()) {
    sum.units += t.units;
    sum.input += t.input;
    sum.output += t.output;
    sum.events += t.events;
  }

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Usage over time</h1>
      <form class="toolbar" aria-label="Chart options" onSubmit={(e) => e.preventDefault()}>
        <Field label="Range">
          <select
            name="range"
            value={range}
            onChange={(e) => {
              const r = valueOf(e);
              setRange(r);
              setGranularity(RANGES[r]!.granularity);
            }}
          >
            {Object.entries(RANGES).map(([k, r]) => (
              <option key={k} value={k}>
                {r.label}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Per">
          <select name="granularity" value={granularity} onChange={(e) => setGranularity(valueOf(e) as Granularity)}>
            <option value="hour">Hour</option>
            <option value="day">Day</option>
          </select>
        </Field>
        <Field label="By">
          <select name="groupBy" value={groupBy} onChange={(e) => setGroupBy(valueOf(e) as GroupBy)}>
            <option value="model">Model</option>
            <option value="access">Access (user)</option>
            <option value="connection">Connection</option>
          </select>
        </Field>
        <Field label="Show">
          <select name="metric" value={metric} onChange={(e) => setMetric(valueOf(e) as Metric)}>
            <option value="units">Units</option>
            <option value="tokens">Tokens (input + output)</option>
            <option value="inputTokens">Input tokens</option>
            <option value="outputTokens">Output tokens</option>
          </select>
        </Field>
      </form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
      {summary && summary.buckets.length === 0 ? (
        <Empty>No usage in this range. Usage appears once users call the gateway; try a longer range.</Empty>
      ) : null}
      {summary && summary.buckets.length > 0 ? (
        <>
          <Chart summary={summary} metric={metric} labelOf={labelOf} />
          <p class="lead">
            {summary.granularity === 'day'
              ? 'One bar per UTC day (days start at midnight UTC).'
              : `One bar per hour, in your time zone (${localZone()}).`}
          </p>
          <table>
            <caption>
              Totals from {new Date(summary.since).toLocaleString()} to {new Date(summary.until).toLocaleString()}
            </caption>
            <thead>
              <tr>
                <th scope="col">{groupBy === 'model' ? 'Model' : groupBy === 'access' ? 'User' : 'Connection'}</th>
                <th scope="col" class="num">
                  Units
                </th>
                <th scope="col" class="num">
                  Input tokens
                </th>
                <th scope="col" class="num">
                  Output tokens
                </th>
                <th scope="col" class="num">
                  Events
                </th>
              </tr>
            </thead>
            <tbody>
              {[...totals].map(([key, t]) => (
                <tr key={key}>
                  <td>{labelOf(key) || '(none)'}</td>
                  <td class="num">{formatNumber(t.units)}</td>
                  <td class="num">{formatNumber(t.input)}</td>
                  <td class="num">{formatNumber(t.output)}</td>
                  <td class="num">{formatNumber(t.events)}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row">Total</th>
                <td class="num">{formatNumber(sum.units)}</td>
                <td class="num">{formatNumber(sum.input)}</td>
                <td class="num">{formatNumber(sum.output)}</td>
                <td class="num">{formatNumber(sum.events)}</td>
              </tr>
            </tfoot>
          </table>
        </>
      ) : null}
    </section>
  );
}
