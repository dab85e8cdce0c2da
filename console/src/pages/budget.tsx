import { useState } from 'preact/hooks';
import {
  getUsageSummary,
  getWorkspaceBudget,
  setWorkspaceBudget,
  updateWorkspace,
  type Client,
  type UsageSummaryDto,
  type WorkspaceBudgetDto,
} from '../api.js';
import { formatMoney, microsOf, moneyDecimals } from '../format.js';
import { useAction, useFields, useRead, valueOf } from '../hooks.js';
import { ActionNotes, Empty, Figures, Form, Input, Page, Select, WORKSPACES_CHANGED, type PageProps } from '../ui.js';
import { PerPeriodTable } from './usage-table.js';
import { OTHER } from './usage-chart.js';

/** The budget's two levels: the form's field, the budget's limit and whether it is crossed, and what reaching it does. */
const LEVELS = [
  { field: 'soft', name: 'Soft level', limit: 'softLimitMicros', crossed: 'softCrossed', does: 'Reports crossed; empty: none' },
  { field: 'hard', name: 'Hard level', limit: 'hardLimitMicros', crossed: 'hardCrossed', does: 'Refuses new calls; empty: none' },
] as const;
type Level = (typeof LEVELS)[number];

/** Micro-units as a decimal amount for an input: 12500000 → 12.5. */
function amountOf(micros: string | undefined): string {
  if (!micros) return '';
  const m = BigInt(micros);
  const fraction = String(m % 1_000_000n)
    .padStart(6, '0')
    .replace(/0+$/, '');
  return fraction ? `${m / 1_000_000n}.${fraction}` : String(m / 1_000_000n);
}

/** Spend against one level: the amount, how much of it is spent, and whether it is crossed. */
function Spent({ level, budget }: { level: Level; budget: WorkspaceBudgetDto }) {
  const limit = budget[level.limit];
  if (limit === undefined) return <>none</>;
  const spent = BigInt(budget.spentMicros);
  const max = BigInt(limit);
  const percent = max > 0n ? Number((spent * 10_000n) / max) / 100 : 100;
  return (
    <>
      {formatMoney(limit, budget.currency)} · {percent.toLocaleString(undefined, { maximumFractionDigits: 2 })} % spent{' '}
      {budget[level.crossed] ? <span class="badge over">crossed</span> : null}
      <div>
        <meter
          min={0}
          max={100}
          low={80}
          high={99.99}
          optimum={0}
          value={Math.min(percent, 100)}
          aria-label={`${level.name}: ${percent} % spent`}
        />
      </div>
    </>
  );
}

/** An instant as the workspace's zone writes it: "Tue, 1 Dec 2026, 00:00 (Europe/Paris)". */
function inZone(iso: string, timeZone: string): string {
  const text = new Intl.DateTimeFormat(undefined, { timeZone, dateStyle: 'medium', timeStyle: 'short' }).format(new Date(iso));
  return `${text} (${timeZone})`;
}

/** The budget window's spend per day and model, days in the workspace's zone: what the spent figure is made of. */
function SpendPerDay({ client, budget }: { client: Client; budget: WorkspaceBudgetDto }) {
  const [summary, setSummary] = useState<UsageSummaryDto | undefined>();
  const load = useAction();
  const timeZone = budget.timeZone ?? 'UTC';
  useRead(
    async () =>
      (
        await getUsageSummary({
          client,
          path: { workspaceId: budget.workspaceId },
          query: { since: budget.windowStart, until: budget.windowEnd, granularity: 'day', groupBy: 'model', timeZone },
        })
      ).data,
    setSummary,
    [budget.workspaceId, budget.windowStart, budget.windowEnd, timeZone],
    { action: load, label: 'Reading the spend per day…' },
  );
  const decimals = moneyDecimals(summary?.buckets.map((b) => b.costMicros) ?? [], budget.currency);
  const format = (v: number) => formatMoney(v, budget.currency, decimals);
  return (
    <>
      <ActionNotes action={load} />
      {summary ? <PerPeriodTable summary={summary} metric="cost" labelOf={(k) => (k === OTHER ? 'Other' : k)} format={format} /> : null}
    </>
  );
}

/** The workspace's time zone, whose days and months the budget counts: an IANA name, offered from the browser's list. */
function TimeZoneForm({
  client,
  workspaceId,
  current,
  onSaved,
}: {
  client: Client;
  workspaceId: string;
  current: string;
  onSaved: () => void;
}) {
  const [zone, setZone] = useState(current);
  const action = useAction();
  const save = async () => {
    const res = await action.run('Saving the time zone…', () =>
      updateWorkspace({ client, path: { workspaceId }, body: { timeZone: zone.trim() } }),
    );
    if (!res) return;
    window.dispatchEvent(new Event(WORKSPACES_CHANGED));
    onSaved();
  };
  return (
    <Form title="The workspace's time zone" submit="Save time zone" onSubmit={save} disabled={!!action.working}>
      <Input
        label="Time zone"
        hint={`An IANA name, such as Europe/Paris; your browser's is ${Intl.DateTimeFormat().resolvedOptions().timeZone}`}
        name="timeZone"
        list="time-zones"
        required
        value={zone}
        onInput={(e) => setZone(valueOf(e))}
      />
      <datalist id="time-zones">
        {Intl.supportedValuesOf('timeZone').map((z) => (
          <option key={z} value={z} />
        ))}
      </datalist>
      <ActionNotes action={action} />
    </Form>
  );
}

/** The form's values of a budget. */
const formOf = (b: WorkspaceBudgetDto) => ({ period: b.period, soft: amountOf(b.softLimitMicros), hard: amountOf(b.hardLimitMicros) });

export function BudgetPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [budget, setBudget] = useState<WorkspaceBudgetDto | null | undefined>();
  // Read again when the time zone is saved: the window moves with it.
  const [version, setVersion] = useState(0);
  const timeZone = budget?.timeZone ?? workspace.timeZone ?? 'UTC';
  const { values: form, bind, bindChange, replace } = useFields({ period: 'MONTH' as 'DAY' | 'MONTH', soft: '', hard: '' });
  const load = useAction();
  const action = useAction();
  const currency = budget?.currency ?? workspace.currency ?? 'USD';
  const show = (b: WorkspaceBudgetDto) => {
    setBudget(b);
    replace(formOf(b));
  };
  useRead(
    async () => {
      try {
        return (await getWorkspaceBudget({ client, path: { workspaceId } })).data;
      } catch (err) {
        // None set yet is a state of the page, not an error.
        if ((err as { status?: number }).status === 404) return null;
        throw err;
      }
    },
    (found) => (found ? show(found) : setBudget(null)),
    [workspaceId, version],
    { action: load, label: 'Reading the budget…' },
  );
  const save = async () => {
    const res = await action.run('Saving the budget…', () => {
      const limits = LEVELS.map((level) => {
        const amount = form[level.field];
        if (!amount.trim()) return {};
        const micros = microsOf(amount);
        if (micros === undefined)
          throw new Error(`${level.name}: write an amount in ${currency}, such as 250 or 12.50 (at most six decimals).`);
        return { [level.limit]: micros };
      });
      return setWorkspaceBudget({ client, path: { workspaceId }, body: Object.assign({ period: form.period }, ...limits) });
    });
    if (res) show(res.data);
  };
  return (
    <Page
      title="Budget"
      lead={
        <>
          The workspace's provider spend per day or month in its time zone ({timeZone}), in {currency}, from the price book. At the soft
          level the budget reports itself crossed (and a <code>workspace.budget_crossed</code> event is sent); at the hard level the gateway
          refuses new metered and passed-through calls with 402 until the window ends or the budget is raised.
        </>
      }
    >
      <ActionNotes action={load} />
      {budget === null ? <Empty>No budget set: spend is not limited. Set one below.</Empty> : null}
      {budget ? (
        <section class="card" aria-labelledby="spend-title">
          <h2 id="spend-title">This {budget.period === 'DAY' ? 'day' : 'month'}</h2>
          <Figures
            items={[
              [
                'Window',
                `${inZone(budget.windowStart, timeZone)} to ${inZone(budget.windowEnd, timeZone)}`,
                { 'data-testid': 'budget-window' },
              ],
              ['Spent', formatMoney(budget.spentMicros, budget.currency), { 'data-testid': 'budget-spent' }],
              ...LEVELS.map((level) => [level.name, <Spent level={level} budget={budget} />] as const),
            ]}
          />
          <SpendPerDay client={client} budget={budget} />
        </section>
      ) : null}
      {budget !== undefined ? (
        <Form operation="setWorkspaceBudget" title="Set the budget" submit="Save budget" onSubmit={save} disabled={!!action.working}>
          <div class="grid">
            <Select
              label="Period"
              hint={`Days or months in ${timeZone}`}
              name="period"
              choices={{ DAY: 'Day', MONTH: 'Month' }}
              {...bindChange('period')}
            />
            {LEVELS.map((level) => (
              <Input
                key={level.field}
                label={`${level.name} (${currency})`}
                hint={level.does}
                name={level.field}
                inputMode="decimal"
                {...bind(level.field)}
              />
            ))}
          </div>
        </Form>
      ) : null}
      <ActionNotes action={action} />
      <TimeZoneForm client={client} workspaceId={workspaceId} current={timeZone} onSaved={() => setVersion((v) => v + 1)} />
    </Page>
  );
}
