import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import {
  getUsageSummary,
  listPlans,
  listProviderConnections,
  type Client,
  type UsageBucketDto,
  type GetUsageSummaryData,
  type UsageSummaryDto,
} from '../api.js';
import type { PageProps } from '../main.js';
import {
  Empty,
  ErrorNote,
  Field,
  formatMoney,
  formatNumber,
  useAccessNames,
  useAction,
  useRead,
  useInferenceKeys,
  valueOf,
  Working,
} from '../ui.js';

type Granularity = 'hour' | 'day';
/** The groupings this page knows; `key` and `plan` are offered when the API answers them (see useGroupings). */
type GroupBy = 'model' | 'access' | 'connection' | 'key' | 'plan';
type Metric = 'cost' | 'calls' | 'failedCalls' | 'refusedCalls' | 'units' | 'tokens' | 'inputTokens' | 'outputTokens';
/** The call counts a bucket carries on a Nexus that counts calls; read defensively, as an older one has none. */
type CallCount = 'calls' | 'failedCalls' | 'refusedCalls';
const CALL_COUNTS: CallCount[] = ['calls', 'failedCalls', 'refusedCalls'];

const GROUPINGS: Record<GroupBy, { label: string; column: string }> = {
  model: { label: 'Model', column: 'Model' },
  access: { label: 'Access (user)', column: 'User' },
  connection: { label: 'Connection', column: 'Connection' },
  key: { label: 'Inference key', column: 'Key' },
  plan: { label: 'Plan', column: 'Plan' },
};

const METRICS: Record<Metric, string> = {
  cost: 'Spend',
  calls: 'Calls',
  failedCalls: 'Errors (failed calls)',
  refusedCalls: 'Refused calls',
  units: 'Units',
  tokens: 'Tokens (input + output)',
  inputTokens: 'Input tokens',
  outputTokens: 'Output tokens',
};

/** A bucket's call count (`calls`, `failedCalls`, `refusedCalls`), a number or a decimal string; undefined where the API has none. */
function countOf(b: UsageBucketDto, field: CallCount): bigint | undefined {
  const v = (b as unknown as Record<string, unknown>)[field];
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^\d+$/.test(v)) return BigInt(v);
  return undefined;
}

const RANGES: Record<string, { label: string; ms: number; granularity: Granularity }> = {
  '24h': { label: 'Last 24 hours', ms: 86_400_000, granularity: 'hour' },
  '7d': { label: 'Last 7 days', ms: 7 * 86_400_000, granularity: 'hour' },
  '30d': { label: 'Last 30 days', ms: 30 * 86_400_000, granularity: 'day' },
  '365d': { label: 'Last 365 days', ms: 365 * 86_400_000, granularity: 'day' },
};
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

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
  }
}

/**
 * A summary's query as the generated client types it: asserted as a whole, so this reads the same whether the
 * client's UsageGroupBy has `key` and `plan` yet or not.
 */
const summaryQuery = (q: { since: string; until?: string; granularity: Granularity; groupBy: GroupBy; timeZone?: string }) =>
  q as NonNullable<GetUsageSummaryData['query']>;

/**
 * The groupings the API answers: `key` and `plan` are asked for once, over the last hour; a Nexus that does not know
 * them refuses with 400, and they are left out.
 */
let newGroupings: Promise<GroupBy[]> | undefined;
function useGroupings(client: Client, workspaceId: string): GroupBy[] {
  const [known, setKnown] = useState<GroupBy[]>(['model', 'access', 'connection']);
  useEffect(() => {
    newGroupings ??= Promise.all(
      (['key', 'plan'] as const).map((groupBy) =>
        getUsageSummary({
          client,
          path: { workspaceId },
          query: summaryQuery({ since: new Date(Date.now() - 3_600_000).toISOString(), granularity: 'hour', groupBy }),
        }).then(
          () => [groupBy],
          () => [],
        ),
      ),
    ).then((found) => found.flat());
    let live = true;
    void newGroupings.then((more) => live && setKnown(['model', 'access', 'connection', ...more]));
    return () => {
      live = false;
    };
  }, [workspaceId]);
  return known;
}

/**
 * The buckets as uPlot's columns: every bucket start of the range (seconds; the API leaves out the
 * buckets without events, drawn here as zeros), then one series per key.
 */
function columns(summary: UsageSummaryDto, metric: Metric): { keys: string[]; data: uPlot.AlignedData } {
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

/** The zone whose days the API summed (a Nexus that does not say sums UTC days). */
const dayZone = (summary: UsageSummaryDto) => (summary as { timeZone?: string }).timeZone ?? 'UTC';

/**
 * What the x axis is in: hours in the operator's time zone; days in the zone the API summed them in (the
 * operator's, asked for), so a day is labelled as the day it is (never as "1:00am" of the day before).
 */
const axisZone = (summary: UsageSummaryDto) => (summary.granularity === 'day' ? dayZone(summary) : localZone());

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
function Chart(props: { summary: UsageSummaryDto; metric: Metric; labelOf: (key: string) => string; format: (v: number) => string }) {
  const { summary, metric, labelOf, format } = props;
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!box.current || summary.buckets.length === 0) return;
    const { keys, data } = columns(summary, metric);
    const raw = data.slice(1) as number[][];
    const stacked = raw.map((_, i) => raw[0]!.map((__, j) => raw.slice(0, i + 1).reduce((sum, row) => sum + row[j]!, 0)));
    const order = keys.map((_, i) => keys.length - 1 - i);
    const zone = axisZone(summary);
    const bars = uPlot.paths.bars!({ size: [0.8, 48], align: 0 });
    const step = summary.granularity === 'hour' ? 3600 : 86_400;
    const starts = data[0] as number[];
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

interface Totals {
  cost: bigint;
  unpriced: number;
  units: bigint;
  input: bigint;
  output: bigint;
  events: number;
  /** Absent where the API counts no calls. */
  calls?: Record<CallCount, bigint>;
}

function add(t: Totals, b: UsageBucketDto): Totals {
  const counts = CALL_COUNTS.map((f) => countOf(b, f));
  return {
    cost: t.cost + BigInt(b.costMicros ?? '0'),
    unpriced: t.unpriced + (b.unpricedEvents ?? 0),
    units: t.units + BigInt(b.units),
    input: t.input + BigInt(b.inputTokens),
    output: t.output + BigInt(b.outputTokens),
    events: t.events + b.events,
    ...(counts.every((c) => c !== undefined)
      ? {
          calls: {
            calls: (t.calls?.calls ?? 0n) + counts[0]!,
            failedCalls: (t.calls?.failedCalls ?? 0n) + counts[1]!,
            refusedCalls: (t.calls?.refusedCalls ?? 0n) + counts[2]!,
          },
        }
      : t.calls
        ? { calls: t.calls }
        : {}),
  };
}
const NO_TOTALS: Totals = { cost: 0n, unpriced: 0, units: 0n, input: 0n, output: 0n, events: 0 };

/** The share of calls that failed, to a tenth of a percent. */
function errorRate(c: Record<CallCount, bigint> | undefined): string {
  if (!c || c.calls === 0n) return '—';
  return `${(Number((c.failedCalls * 1000n) / c.calls) / 10).toLocaleString(undefined, { maximumFractionDigits: 1 })} %`;
}

/** A row of the totals table: spend, calls (where counted), units and tokens. */
function TotalCells({ t, currency, counted }: { t: Totals; currency: string; counted: boolean }) {
  return (
    <>
      <td class="num">
        {formatMoney(t.cost, currency)}
        {t.unpriced ? <span class="id"> ({formatNumber(t.unpriced)} unpriced)</span> : null}
      </td>
      {counted ? (
        <>
          <td class="num">{formatNumber(t.calls?.calls)}</td>
          <td class="num">{formatNumber(t.calls?.failedCalls)}</td>
          <td class="num">{errorRate(t.calls)}</td>
          <td class="num">{formatNumber(t.calls?.refusedCalls)}</td>
        </>
      ) : null}
      <td class="num">{formatNumber(t.units)}</td>
      <td class="num">{formatNumber(t.input)}</td>
      <td class="num">{formatNumber(t.output)}</td>
      <td class="num">{formatNumber(t.events)}</td>
    </>
  );
}

export function UsagePage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [range, setRange] = useState('24h');
  const [granularity, setGranularity] = useState<Granularity>('hour');
  const [groupBy, setGroupBy] = useState<GroupBy>('model');
  const [chosenMetric, setMetric] = useState<Metric | undefined>();
  /** The summary shown, and the grouping it was asked with: its keys are that grouping's (the one chosen since may still be summing). */
  const [shown, setShown] = useState<{ summary: UsageSummaryDto; groupBy: GroupBy } | undefined>();
  const [names, setNames] = useState<Record<string, string>>({});
  const groupings = useGroupings(client, workspaceId);
  const action = useAction();

  useEffect(() => {
    // Connections and plans by name (their ids are the keys of those groupings).
    void Promise.all([
      listProviderConnections({ client, path: { workspaceId }, query: { limit: 100 } }).then(
        (p) => p.data.map((c) => [c.id, c.name] as const),
        () => [],
      ),
      listPlans({ client, path: { workspaceId }, query: { limit: 100 } }).then(
        (p) => p.data.map((plan) => [plan.id, plan.name] as const),
        () => [],
      ),
    ]).then((found) => setNames(Object.fromEntries(found.flat())));
  }, [workspaceId]);

  useRead(
    async () => {
      const until = new Date();
      const since = new Date(until.getTime() - RANGES[range]!.ms);
      const query = summaryQuery({ since: since.toISOString(), until: until.toISOString(), granularity, groupBy, timeZone: localZone() });
      return { summary: (await getUsageSummary({ client, path: { workspaceId }, query })).data, groupBy };
    },
    setShown,
    [workspaceId, range, granularity, groupBy],
    { action, label: 'Summing usage…' },
  );

  const summary = shown?.summary;
  const shownBy = shown?.groupBy ?? groupBy;
  const buckets = summary?.buckets ?? [];
  const seriesKeys = buckets.map((b) => b.key).filter(Boolean);
  // Keys by their user, name and prefix: each key read once (getInferenceKey), then its access's user.
  const keys = useInferenceKeys(client, shownBy === 'key' ? seriesKeys : []);
  const users = useAccessNames(
    client,
    workspaceId,
    shownBy === 'access' ? seriesKeys : Object.values(keys).map((k) => k.workspaceAccessId),
  );
  const labelOf = (key: string) => {
    const found = shownBy === 'key' ? keys[key] : undefined;
    if (found) return `${users[found.workspaceAccessId] ?? '…'} · ${found.name} (${found.prefix}…)`;
    return names[key] ?? users[key] ?? key;
  };
  const currency = summary?.currency ?? workspace.currency ?? 'USD';
  // Calls are counted by a Nexus whose buckets carry them; spend is shown first where any call had a price.
  const counted = buckets.length > 0 && buckets.every((b) => countOf(b, 'calls') !== undefined);
  const priced = buckets.some((b) => BigInt(b.costMicros ?? '0') > 0n);
  const metrics = (Object.keys(METRICS) as Metric[]).filter((m) => counted || !CALL_COUNTS.includes(m as CallCount));
  const metric = chosenMetric && metrics.includes(chosenMetric) ? chosenMetric : priced ? 'cost' : 'units';
  // One format for the table, the axis and the legend.
  const format = (v: number) => (metric === 'cost' ? formatMoney(v, currency) : formatNumber(v));

  const totals = new Map<string, Totals>();
  for (const b of buckets) totals.set(b.key, add(totals.get(b.key) ?? NO_TOTALS, b));
  const sum = buckets.reduce(add, NO_TOTALS);
  const rows = [...totals].sort(([, a], [, b]) =>
    b.cost > a.cost ? 1 : b.cost < a.cost ? -1 : b.units > a.units ? 1 : b.units < a.units ? -1 : 0,
  );

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
            {/* A summary holds at most 1000 buckets: a year by hour is too many. */}
            <option value="hour" disabled={RANGES[range]!.ms / 3_600_000 > 1000}>
              Hour
            </option>
            <option value="day">Day</option>
          </select>
        </Field>
        <Field label="By">
          <select name="groupBy" value={groupBy} onChange={(e) => setGroupBy(valueOf(e) as GroupBy)}>
            {groupings.map((g) => (
              <option key={g} value={g}>
                {GROUPINGS[g].label}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Show">
          <select name="metric" value={metric} onChange={(e) => setMetric(valueOf(e) as Metric)}>
            {metrics.map((m) => (
              <option key={m} value={m}>
                {m === 'cost' ? `Spend (${currency})` : METRICS[m]}
              </option>
            ))}
          </select>
        </Field>
      </form>
      <Working label={action.working} keepSpace />
      <ErrorNote problem={action.problem} />
      {summary && buckets.length === 0 ? (
        <Empty>No usage in this range. Usage appears once users call the gateway; try a longer range.</Empty>
      ) : null}
      {summary && buckets.length > 0 ? (
        <>
          <Chart summary={summary} metric={metric} labelOf={labelOf} format={format} />
          <p class="lead">
            {summary.granularity === 'day'
              ? `One bar per day, days in ${dayZone(summary)} (from its midnight).`
              : `One bar per hour, in your time zone (${localZone()}).`}{' '}
            Spend is the providers' cost from the price book, in {currency}.
            {sum.unpriced ? ` ${formatNumber(sum.unpriced)} calls had no price: add one on the Prices page to count them.` : ''}
          </p>
          <table>
            <caption>
              Totals from {new Date(summary.since).toLocaleString()} to {new Date(summary.until).toLocaleString()}
            </caption>
            <thead>
              <tr>
                <th scope="col">{GROUPINGS[shownBy].column}</th>
                <th scope="col" class="num">
                  Spend ({currency})
                </th>
                {counted ? (
                  <>
                    <th scope="col" class="num">
                      Calls
                    </th>
                    <th scope="col" class="num">
                      Errors
                    </th>
                    <th scope="col" class="num">
                      Error rate
                    </th>
                    <th scope="col" class="num">
                      Refused
                    </th>
                  </>
                ) : null}
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
              {rows.map(([key, t]) => (
                <tr key={key}>
                  <td>{labelOf(key) || '(none)'}</td>
                  <TotalCells t={t} currency={currency} counted={counted} />
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row">Total</th>
                <TotalCells t={sum} currency={currency} counted={counted} />
              </tr>
            </tfoot>
          </table>
        </>
      ) : null}
    </section>
  );
}
