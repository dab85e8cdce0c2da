import { useEffect, useState } from 'preact/hooks';
import {
  exportUsageSummary,
  getUsageSummary,
  type Client,
  type GetUsageSummaryData,
  type UsageBucketDto,
  type UsageSummaryDto,
} from '../api.js';
import { RangePicker } from '../components/range-picker.js';
import { saveFile, stamp } from '../download.js';
import { initialRange, rangeText, resolveRange, type Granularity, type Range } from '../ranges.js';
import { formatMoney, formatNumber, moneyDecimals } from '../format.js';
import { useAction, useRead, valueOf } from '../hooks.js';
import { namesOf, useAccessNames, useConnections, useInferenceKeys, usePlans } from '../lookups.js';
import { Empty, ErrorNote, Page, Select, Toolbar, Working, type PageProps } from '../ui.js';
import { addKinds, kindsText, type KindCounts } from '../kinds.js';
import {
  CALL_COUNTS,
  Chart,
  countOf,
  dayZone,
  KIND_METRICS,
  kindOf,
  localZone,
  METRICS,
  OTHER,
  TOP_SERIES,
  type CallCount,
  type Metric,
} from './usage-chart.js';
import { PerPeriodTable } from './usage-table.js';

/** The groupings this page knows; `key` and `plan` are offered when the API answers them (see useGroupings). */
type GroupBy = 'model' | 'access' | 'connection' | 'key' | 'plan';

const GROUPINGS: Record<GroupBy, { label: string; column: string }> = {
  model: { label: 'Model', column: 'Model' },
  access: { label: 'Access (user)', column: 'User' },
  connection: { label: 'Connection', column: 'Connection' },
  key: { label: 'Inference key', column: 'Key' },
  plan: { label: 'Plan', column: 'Plan' },
};

/**
 * A summary's query as the generated client types it: asserted as a whole, so this reads the same whether the
 * client's UsageGroupBy has `key` and `plan` yet or not.
 */
const summaryQuery = (q: {
  since: string;
  until?: string;
  granularity: Granularity;
  groupBy: GroupBy;
  timeZone?: string;
  top?: number;
  offset?: number;
}) => q as NonNullable<GetUsageSummaryData['query']>;

/**
 * Groupings of as many series as there are users or keys: the API is asked for the chart's largest series (by spend
 * over the range) and one "Other" series a bucket (`top`), not for every user's every day; the next ones a page at a
 * time (`offset`), and every one of them in the CSV.
 */
const TOPPED: GroupBy[] = ['access', 'key'];
const SERIES_NAMES: Partial<Record<GroupBy, string>> = { access: 'Users', key: 'Keys' };

/** Which of the ranked series a topped summary shows, and how many there are: "Users 10–18 of 2,000 by spend", and the pages. */
function SeriesPager(props: { noun: string; offset: number; count: number; onPage: (offset: number) => void; busy: boolean }) {
  const { noun, offset, count, onPage, busy } = props;
  if (count <= TOP_SERIES && offset === 0) return null;
  const last = Math.min(offset + TOP_SERIES, count);
  return (
    <nav class="pager" aria-label={`Pages of ${noun.toLowerCase()}`}>
      <button type="button" onClick={() => onPage(Math.max(0, offset - TOP_SERIES))} disabled={offset === 0 || busy}>
        ← Previous {TOP_SERIES}
      </button>
      <span>
        {offset < count
          ? `${noun} ${formatNumber(offset + 1)}–${formatNumber(last)} of ${formatNumber(count)} by spend; the others are "Other". Every one is in the CSV.`
          : `${noun}: ${formatNumber(count)}.`}
      </span>
      <button type="button" onClick={() => onPage(offset + TOP_SERIES)} disabled={last >= count || busy}>
        Next {TOP_SERIES} →
      </button>
    </nav>
  );
}

/** The summary as the chart reads it: the API's `other` series under the chart's own key for it. */
const withOther = (summary: UsageSummaryDto): UsageSummaryDto => ({
  ...summary,
  buckets: summary.buckets.map((b) => (b.other ? { ...b, key: OTHER } : b)),
});

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

interface Totals {
  cost: bigint;
  unpriced: number;
  units: bigint;
  input: bigint;
  output: bigint;
  events: number;
  /** Absent where the API counts no calls. */
  calls?: Record<CallCount, bigint>;
  /** The kinds beyond text tokens (docs/pricing.md, "Kinds"). */
  kinds: KindCounts;
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
    kinds: addKinds(t.kinds, b),
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
const NO_TOTALS: Totals = { cost: 0n, unpriced: 0, units: 0n, input: 0n, output: 0n, events: 0, kinds: {} };

/** The share of calls that failed, to a tenth of a percent. */
function errorRate(c: Record<CallCount, bigint> | undefined): string {
  if (!c || c.calls === 0n) return '—';
  return `${(Number((c.failedCalls * 1000n) / c.calls) / 10).toLocaleString(undefined, { maximumFractionDigits: 1 })} %`;
}

/** The totals' columns: spend, the call counts (where the API counts calls), units, tokens and events. */
const COLUMNS: { label: string; calls?: boolean }[] = [
  { label: 'Calls', calls: true },
  { label: 'Errors', calls: true },
  { label: 'Error rate', calls: true },
  { label: 'Refused', calls: true },
  { label: 'Units' },
  { label: 'Input tokens' },
  { label: 'Output tokens' },
  { label: 'Events' },
];

/** A row of the totals table: spend, calls (where counted), units and tokens. */
function TotalCells(props: { t: Totals; currency: string; decimals: number; counted: boolean; kinds: boolean }) {
  const { t, currency, decimals, counted, kinds } = props;
  const calls = [formatNumber(t.calls?.calls), formatNumber(t.calls?.failedCalls), errorRate(t.calls), formatNumber(t.calls?.refusedCalls)];
  const cells = [...(counted ? calls : []), formatNumber(t.units), formatNumber(t.input), formatNumber(t.output), formatNumber(t.events)];
  return (
    <>
      <td class="num">
        {formatMoney(t.cost, currency, decimals)}
        {t.unpriced ? <span class="id"> ({formatNumber(t.unpriced)} unpriced)</span> : null}
      </td>
      {cells.map((cell, i) => (
        <td key={i} class="num">
          {cell}
        </td>
      ))}
      {kinds ? <td class="kinds">{kindsText(t.kinds) || '—'}</td> : null}
    </>
  );
}

/** The totals of the range, a row per key (the most spent first), then their sum. */
function TotalsTable(props: {
  summary: UsageSummaryDto;
  column: string;
  currency: string;
  counted: boolean;
  labelOf: (key: string) => string;
}) {
  const { summary, currency, counted } = props;
  const totals = new Map<string, Totals>();
  for (const b of summary.buckets) totals.set(b.key, add(totals.get(b.key) ?? NO_TOTALS, b));
  const sum = summary.buckets.reduce(add, NO_TOTALS);
  // A column of the kinds beyond text tokens, where the range has some.
  const kinds = kindsText(sum.kinds) !== '';
  const decimals = moneyDecimals([...[...totals.values()].map((t) => t.cost), sum.cost], currency);
  // The most spent first; "Other" (the keys beyond the chart's) last.
  const rows = [...totals].sort(([ka, a], [kb, b]) =>
    ka === OTHER ? 1 : kb === OTHER ? -1 : b.cost > a.cost ? 1 : b.cost < a.cost ? -1 : b.units > a.units ? 1 : b.units < a.units ? -1 : 0,
  );
  return (
    <table>
      <caption>
        Totals from {new Date(summary.since).toLocaleString()} to {new Date(summary.until).toLocaleString()}
      </caption>
      <thead>
        <tr>
          <th scope="col">{props.column}</th>
          <th scope="col" class="num">
            Spend ({currency})
          </th>
          {COLUMNS.filter((c) => counted || !c.calls).map((c) => (
            <th key={c.label} scope="col" class="num">
              {c.label}
            </th>
          ))}
          {kinds ? <th scope="col">Beyond text</th> : null}
        </tr>
      </thead>
      <tbody>
        {rows.map(([key, t]) => (
          <tr key={key}>
            <td>{props.labelOf(key) || '(none)'}</td>
            <TotalCells t={t} currency={currency} decimals={decimals} counted={counted} kinds={kinds} />
          </tr>
        ))}
      </tbody>
      <tfoot>
        <tr>
          <th scope="row">Total</th>
          <TotalCells t={sum} currency={currency} decimals={decimals} counted={counted} kinds={kinds} />
        </tr>
      </tfoot>
    </table>
  );
}

/** A range as the API's instants. */
const instants = (range: Range) => ({ since: range.since.toISOString(), until: range.until.toISOString() });

/** The summary of the range as CSV (exportUsageSummary: the buckets, a column per count), saved by the browser. */
function ExportButton(props: { client: Client; workspaceId: string; range: Range; granularity: Granularity; groupBy: GroupBy }) {
  const { client, workspaceId, range, granularity, groupBy } = props;
  const action = useAction();
  const save = async () => {
    const query = { ...instants(range), granularity, groupBy, timeZone: localZone() };
    const csv = await action.run('Exporting…', async () => {
      const res = await exportUsageSummary({ client, path: { workspaceId }, query, parseAs: 'text' });
      return res.data;
    });
    if (csv !== undefined) saveFile(csv, `usage-by-${groupBy}-${stamp()}.csv`);
  };
  return (
    <>
      <button type="button" onClick={() => void save()} disabled={!!action.working}>
        Export CSV
      </button>
      <ErrorNote problem={action.problem} />
    </>
  );
}

/** A series' label from its key under `groupBy`: a connection's or plan's name, a user's, or a key's user, name and prefix. */
function useSeriesLabels(client: PageProps['client'], workspaceId: string, groupBy: GroupBy, buckets: UsageSummaryDto['buckets']) {
  // Connections and plans by name (their ids are the keys of those groupings).
  const names = { ...namesOf(useConnections(client, workspaceId)), ...namesOf(usePlans(client, workspaceId)) };
  const seriesKeys = buckets.map((b) => b.key).filter((k) => k && k !== OTHER);
  // Keys by their user, name and prefix: each key read once (getInferenceKey), then its access's user.
  const keys = useInferenceKeys(client, groupBy === 'key' ? seriesKeys : []);
  const users = useAccessNames(
    client,
    workspaceId,
    groupBy === 'access' ? seriesKeys : Object.values(keys).map((k) => k.workspaceAccessId),
  );
  return (key: string) => {
    if (key === OTHER) return 'Other';
    const found = groupBy === 'key' ? keys[key] : undefined;
    if (found) return `${users[found.workspaceAccessId] ?? '…'} · ${found.name} (${found.prefix}…)`;
    return names[key] ?? users[key] ?? key;
  };
}

export function UsagePage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [choice, setChoice] = useState(() => initialRange('24h'));
  const range = resolveRange(choice);
  const [chosenGranularity, setGranularity] = useState<Granularity | undefined>();
  // A summary holds at most 1000 buckets: more than about 41 days is summed by day.
  const hourly = !!range && range.until.getTime() - range.since.getTime() <= 1000 * 3_600_000;
  const granularity = chosenGranularity === 'hour' && !hourly ? 'day' : (chosenGranularity ?? range?.granularity ?? 'day');
  const [groupBy, setGroupBy] = useState<GroupBy>('model');
  const [chosenMetric, setMetric] = useState<Metric | undefined>();
  /** The summary shown, and the grouping it was asked with: its keys are that grouping's (the one chosen since may still be summing). */
  const [shown, setShown] = useState<{ summary: UsageSummaryDto; groupBy: GroupBy; offset: number } | undefined>();
  const groupings = useGroupings(client, workspaceId);
  const action = useAction();

  const rangeKey = range ? `${range.since.getTime()}-${range.until.getTime()}` : '';
  // A rolling range moves with now: read again when it is chosen, not at every render.
  const asked = [workspaceId, choice.preset, choice.preset === 'custom' ? rangeKey : '', granularity, groupBy].join('|');
  // The page of ranked series chosen, for the summary it was chosen on (another range or grouping starts at the first).
  const [paged, setPaged] = useState<{ asked: string; offset: number }>({ asked, offset: 0 });
  const offset = paged.asked === asked ? paged.offset : 0;
  useRead(
    async () => {
      if (!range) return undefined;
      const top = TOPPED.includes(groupBy) ? TOP_SERIES : undefined;
      const query = summaryQuery({
        ...instants(range),
        granularity,
        groupBy,
        timeZone: localZone(),
        ...(top ? { top, ...(offset ? { offset } : {}) } : {}),
      });
      return { summary: withOther((await getUsageSummary({ client, path: { workspaceId }, query })).data), groupBy, offset };
    },
    (found) => found && setShown(found),
    [asked, offset],
    { action, label: 'Summing usage…' },
  );

  const summary = shown?.summary;
  const shownBy = shown?.groupBy ?? groupBy;
  const buckets = summary?.buckets ?? [];
  const labelOf = useSeriesLabels(client, workspaceId, shownBy, buckets);
  const currency = summary?.currency ?? workspace.currency ?? 'USD';
  // Calls are counted by a Nexus whose buckets carry them; spend is shown first where any call had a price.
  const counted = buckets.length > 0 && buckets.every((b) => countOf(b, 'calls') !== undefined);
  const priced = buckets.some((b) => BigInt(b.costMicros ?? '0') > 0n);
  // A kind beyond text tokens is offered where some bucket has it.
  const kinds = KIND_METRICS.filter((k) => buckets.some((b) => kindOf(b, k) > 0));
  const metrics = (Object.keys(METRICS) as Metric[]).filter(
    (m) =>
      (counted || !CALL_COUNTS.includes(m as CallCount)) && (!(KIND_METRICS as Metric[]).includes(m) || (kinds as Metric[]).includes(m)),
  );
  const metric = chosenMetric && metrics.includes(chosenMetric) ? chosenMetric : priced ? 'cost' : 'units';
  // One format for the table, the axis and the legend.
  // Amounts with as many decimals as the range's buckets need, so a column of them lines up.
  const decimals = moneyDecimals(
    buckets.map((b) => b.costMicros),
    currency,
  );
  const format = (v: number) => (metric === 'cost' ? formatMoney(v, currency, decimals) : formatNumber(v));
  const unpriced = buckets.reduce((n, b) => n + (b.unpricedEvents ?? 0), 0);

  return (
    <Page title="Usage over time">
      <Toolbar label="Chart options">
        <RangePicker
          value={choice}
          onChange={(next) => {
            setChoice(next);
            setGranularity(undefined);
          }}
        />
        <Select
          label="Per"
          name="granularity"
          choices={{ hour: 'Hour', day: 'Day' }}
          disabled={hourly ? [] : ['hour']}
          value={granularity}
          onChange={(e) => setGranularity(valueOf(e) as Granularity)}
        />
        <Select
          label="By"
          name="groupBy"
          choices={Object.fromEntries(groupings.map((g) => [g, GROUPINGS[g].label]))}
          value={groupBy}
          onChange={(e) => setGroupBy(valueOf(e) as GroupBy)}
        />
        <Select
          label="Show"
          name="metric"
          choices={Object.fromEntries(metrics.map((m) => [m, m === 'cost' ? `Spend (${currency})` : METRICS[m]]))}
          value={metric}
          onChange={(e) => setMetric(valueOf(e) as Metric)}
        />
        {range ? (
          <ExportButton client={client} workspaceId={workspaceId} range={range} granularity={granularity} groupBy={groupBy} />
        ) : null}
      </Toolbar>
      {range ? (
        <p class="lead">
          {rangeText(range)}, in your time zone ({localZone()}).
        </p>
      ) : (
        <p class="lead">Pick the first and last day.</p>
      )}
      <Working label={action.working} keepSpace />
      <ErrorNote problem={action.problem} />
      {summary && buckets.length === 0 ? (
        <Empty>No usage in this range. Usage appears once users call the gateway; try another range.</Empty>
      ) : null}
      {summary && buckets.length > 0 ? (
        <>
          <Chart summary={summary} metric={metric} labelOf={labelOf} format={format} />
          <p class="lead">
            {summary.granularity === 'day'
              ? `One bar per day, days in ${dayZone(summary)} (from its midnight).`
              : `One bar per hour, in your time zone (${localZone()}).`}{' '}
            Spend is the providers' cost from the price book, in {currency}.
            {unpriced ? ` ${formatNumber(unpriced)} calls had no price: add one on the Prices page to count them.` : ''}
          </p>
          {summary.keyCount !== undefined && SERIES_NAMES[shownBy] ? (
            <SeriesPager
              noun={SERIES_NAMES[shownBy]}
              offset={shown?.offset ?? 0}
              count={summary.keyCount}
              busy={!!action.working}
              onPage={(next) => setPaged({ asked, offset: next })}
            />
          ) : null}
          <PerPeriodTable summary={summary} metric={metric} labelOf={labelOf} format={format} />
          <TotalsTable summary={summary} column={GROUPINGS[shownBy].column} currency={currency} counted={counted} labelOf={labelOf} />
        </>
      ) : null}
    </Page>
  );
}
