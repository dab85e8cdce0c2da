import { useState } from 'preact/hooks';
import { getWorkspaceBudget, setWorkspaceBudget, type WorkspaceBudgetDto } from '../api.js';
import type { PageProps } from '../main.js';
import { Empty, ErrorNote, Field, Form, formatMoney, microsOf, useAction, useRead, valueOf, when, Working } from '../ui.js';

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
function Level({ name, limit, budget }: { name: string; limit: string | undefined; budget: WorkspaceBudgetDto }) {
  if (limit === undefined)
    return (
      <>
        <dt>{name}</dt>
        <dd>none</dd>
      </>
    );
  const spent = BigInt(budget.spentMicros);
  const max = BigInt(limit);
  const percent = max > 0n ? Number((spent * 10_000n) / max) / 100 : 100;
  const crossed = name === 'Soft level' ? budget.softCrossed : budget.hardCrossed;
  return (
    <>
      <dt>{name}</dt>
      <dd>
        {formatMoney(limit, budget.currency)} · {percent.toLocaleString(undefined, { maximumFractionDigits: 2 })} % spent{' '}
        {crossed ? <span class="badge over">crossed</span> : null}
        <div>
          <meter
            min={0}
            max={100}
            low={80}
            high={99.99}
            optimum={0}
            value={Math.min(percent, 100)}
            aria-label={`${name}: ${percent} % spent`}
          />
        </div>
      </dd>
    </>
  );
}

export function BudgetPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [budget, setBudget] = useState<WorkspaceBudgetDto | null | undefined>();
  const [form, setForm] = useState({ period: 'MONTH' as 'DAY' | 'MONTH', soft: '', hard: '' });
  const load = useAction();
  const action = useAction();
  const currency = budget?.currency ?? workspace.currency ?? 'USD';
  const show = (b: WorkspaceBudgetDto) => {
    setBudget(b);
    setForm({ period: b.period, soft: amountOf(b.softLimitMicros), hard: amountOf(b.hardLimitMicros) });
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
    [workspaceId],
    { action: load, label: 'Reading the budget…' },
  );
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: valueOf(e) });
  const save = async () => {
    const res = await action.run('Saving the budget…', () => {
      const level = (label: string, amount: string) => {
        if (!amount.trim()) return undefined;
        const micros = microsOf(amount);
        if (micros === undefined) throw new Error(`${label}: write an amount in ${currency}, such as 250 or 12.50 (at most six decimals).`);
        return micros;
      };
      const soft = level('Soft level', form.soft);
      const hard = level('Hard level', form.hard);
      const body = { period: form.period, ...(soft ? { softLimitMicros: soft } : {}), ...(hard ? { hardLimitMicros: hard } : {}) };
      return setWorkspaceBudget({ client, path: { workspaceId }, body });
    });
    if (res) show(res.data);
  };
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Budget</h1>
      <p class="lead">
        The workspace's provider spend per UTC day or month, in {currency}, from the price book. At the soft level the budget reports itself
        crossed (and a <code>workspace.budget_crossed</code> event is sent); at the hard level the gateway refuses new metered calls with
        402 until the window ends or the budget is raised.
      </p>
      <Working label={load.working} />
      <ErrorNote problem={load.problem} />
      {budget === null ? <Empty>No budget set: spend is not limited. Set one below.</Empty> : null}
      {budget ? (
        <section class="card" aria-labelledby="spend-title">
          <h2 id="spend-title">This {budget.period === 'DAY' ? 'day' : 'month'}</h2>
          <dl class="figures">
            <dt>Window</dt>
            <dd>
              {when(budget.windowStart)} to {when(budget.windowEnd)}
            </dd>
            <dt>Spent</dt>
            <dd data-testid="budget-spent">{formatMoney(budget.spentMicros, budget.currency)}</dd>
            <Level name="Soft level" limit={budget.softLimitMicros} budget={budget} />
            <Level name="Hard level" limit={budget.hardLimitMicros} budget={budget} />
          </dl>
        </section>
      ) : null}
      {budget !== undefined ? (
        <Form title="Set the budget" submit="Save budget" onSubmit={save} disabled={!!action.working}>
          <div class="grid">
            <Field label="Period" hint="UTC days or months">
              <select name="period" value={form.period} onChange={set('period')}>
                <option value="DAY">Day</option>
                <option value="MONTH">Month</option>
              </select>
            </Field>
            <Field label={`Soft level (${currency})`} hint="Reports crossed; empty: none">
              <input name="soft" inputMode="decimal" value={form.soft} onInput={set('soft')} />
            </Field>
            <Field label={`Hard level (${currency})`} hint="Refuses new calls; empty: none">
              <input name="hard" inputMode="decimal" value={form.hard} onInput={set('hard')} />
            </Field>
          </div>
        </Form>
      ) : null}
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
    </section>
  );
}
