import { useState } from 'preact/hooks';
import {
  bindPlanStrategy,
  closePlanStrategyBinding,
  createPlan,
  createQuotaStrategy,
  getPlan,
  idempotencyKey,
  listPlans,
  listPlanStrategies,
  listPlanStrategyBindings,
  publishPlan,
  publishPlanStrategy,
  type Client,
  type Int64String,
  type QuotaStrategyDto,
  type WorkspacePlanDto,
} from '../api.js';
import type { PageProps } from '../main.js';
import {
  Empty,
  ErrorNote,
  Field,
  Form,
  formatNumber,
  multiplier,
  Pager,
  Status,
  usePaged,
  useAction,
  useRead,
  valueOf,
  when,
  Working,
  ListTable,
} from '../ui.js';

/** A datetime-local input's value (the operator's local time) as RFC 3339 UTC. */
const toInstant = (local: string) => new Date(local).toISOString();
const localNow = () => {
  const d = new Date();
  d.setSeconds(0, 0);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
const int64 = (v: string) => v as Int64String;

/** A factor as typed (1, 4, 0.25; at most six decimals) in parts per million, exactly: 0.25 → 250000. */
const FACTOR = /^\d{1,12}(?:\.\d{1,6})?$/;
function ppmOf(factor: string): Int64String {
  const [whole, fraction = ''] = factor.trim().split('.');
  return int64(String(BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, '0'))));
}
const FACTOR_HINT = 'Units per token: 1 = one unit a token, 0.25 = a quarter';

interface RuleRow {
  pattern: string;
  input: string;
  cached: string;
  output: string;
}
const NEW_STRATEGY = {
  key: '',
  resetInterval: 'MONTH' as 'MONTH' | 'YEAR',
  quotaUnits: '100000',
  input: '1',
  output: '1',
  cached: '1',
  maxOutputTokens: '4096',
  outputCapPolicy: 'clamp' as 'clamp' | 'refuse',
  allowedModels: '',
  rules: [] as RuleRow[],
};

/** The model rules editor: one row per rule (a pattern and its three factors), tried in order. */
function RulesEditor({ rules, onChange }: { rules: RuleRow[]; onChange: (rules: RuleRow[]) => void }) {
  const edit = (i: number, field: keyof RuleRow) => (e: Event) =>
    onChange(rules.map((r, j) => (j === i ? { ...r, [field]: valueOf(e) } : r)));
  return (
    <fieldset>
      <legend>Model rules (the first whose pattern matches the model prices the call)</legend>
      {rules.map((r, i) => (
        <div class="grid" key={i} role="group" aria-label={`Model rule ${i + 1}`}>
          <Field label="Model pattern" hint="An exact name or a glob with *">
            <input required value={r.pattern} onInput={edit(i, 'pattern')} />
          </Field>
          <Field label="Input ×">
            <input required inputMode="decimal" pattern={FACTOR.source.slice(1, -1)} value={r.input} onInput={edit(i, 'input')} />
          </Field>
          <Field label="Cached input ×">
            <input required inputMode="decimal" pattern={FACTOR.source.slice(1, -1)} value={r.cached} onInput={edit(i, 'cached')} />
          </Field>
          <Field label="Output ×">
            <input required inputMode="decimal" pattern={FACTOR.source.slice(1, -1)} value={r.output} onInput={edit(i, 'output')} />
          </Field>
          <button type="button" class="danger" onClick={() => onChange(rules.filter((_, j) => j !== i))}>
            Remove rule {i + 1}
          </button>
        </div>
      ))}
      <button type="button" onClick={() => onChange([...rules, { pattern: '', input: '1', cached: '1', output: '1' }])}>
        Add a model rule
      </button>
    </fieldset>
  );
}

/** A strategy's model policy in a line: its rules, its allow-list and what an over-long output cap gets. */
function policyOf(s: QuotaStrategyDto): string {
  const rules = s.modelRules.map(
    (r) =>
      `${r.pattern}: ${multiplier(r.inputMultiplierPpm)} / ${multiplier(r.outputMultiplierPpm)} / ${multiplier(r.cachedInputMultiplierPpm)}`,
  );
  return [
    rules.length ? `Rules ${rules.join('; ')}` : 'No model rule',
    s.allowedModels?.length ? `only ${s.allowedModels.join(', ')}` : 'every model',
    `over ${formatNumber(s.maxOutputTokens)} output tokens: ${s.outputCapPolicy}`,
  ].join(' · ');
}

function Strategies({ client, workspaceId, onChange }: { client: Client; workspaceId: string; onChange: () => void }) {
  const list = usePaged((cursor) => listPlanStrategies({ client, path: { workspaceId }, query: { cursor, limit: 20 } }), [workspaceId]);
  const action = useAction();
  const [form, setForm] = useState(NEW_STRATEGY);
  const set = (field: Exclude<keyof typeof form, 'rules'>) => (e: Event) => setForm({ ...form, [field]: valueOf(e) });
  const create = async () => {
    const allowed = form.allowedModels
      .split(/[\s,]+/)
      .map((m) => m.trim())
      .filter(Boolean);
    const body = {
      key: form.key,
      resetInterval: form.resetInterval,
      quotaUnits: int64(form.quotaUnits),
      inputMultiplierPpm: ppmOf(form.input),
      outputMultiplierPpm: ppmOf(form.output),
      cachedInputMultiplierPpm: ppmOf(form.cached),
      maxOutputTokens: Number(form.maxOutputTokens),
      outputCapPolicy: form.outputCapPolicy,
      modelRules: form.rules.map((r) => ({
        pattern: r.pattern.trim(),
        inputMultiplierPpm: ppmOf(r.input),
        cachedInputMultiplierPpm: ppmOf(r.cached),
        outputMultiplierPpm: ppmOf(r.output),
      })),
      ...(allowed.length ? { allowedModels: allowed } : {}),
    };
    if (
      await action.run('Drafting the strategy…', () =>
        createQuotaStrategy({ client, path: { workspaceId }, body, headers: { 'Idempotency-Key': idempotencyKey() } }),
      )
    ) {
      // Drafted: the form starts again, so the next draft is not this one by accident.
      setForm(NEW_STRATEGY);
      list.reload();
      onChange();
    }
  };
  const publish = async (s: QuotaStrategyDto) => {
    if (await action.run('Publishing…', () => publishPlanStrategy({ client, path: { strategyId: s.id } }))) {
      list.reload();
      onChange();
    }
  };
  return (
    <section aria-labelledby="strategies-title">
      <h2 id="strategies-title">Quota strategies</h2>
      <p class="lead">
        A strategy says how many units a period grants and what a token costs. A new draft of an existing key is its next version; a
        published version never changes.
      </p>
      <Form title="Draft a quota strategy" submit="Draft strategy" onSubmit={create} disabled={!!action.working}>
        <div class="grid">
          <Field label="Key" hint="The same key again drafts its next version">
            <input name="strategyKey" required value={form.key} onInput={set('key')} />
          </Field>
          <Field label="Reset every">
            <select name="resetInterval" value={form.resetInterval} onChange={set('resetInterval')}>
              <option value="MONTH">Month</option>
              <option value="YEAR">Year</option>
            </select>
          </Field>
          <Field label="Units per period">
            <input name="quotaUnits" required inputMode="numeric" pattern="[0-9]+" value={form.quotaUnits} onInput={set('quotaUnits')} />
          </Field>
          <Field label="Input token ×" hint={FACTOR_HINT}>
            <input
              name="input"
              required
              inputMode="decimal"
              pattern={FACTOR.source.slice(1, -1)}
              value={form.input}
              onInput={set('input')}
            />
          </Field>
          <Field label="Output token ×">
            <input
              name="output"
              required
              inputMode="decimal"
              pattern={FACTOR.source.slice(1, -1)}
              value={form.output}
              onInput={set('output')}
            />
          </Field>
          <Field label="Cached input token ×">
            <input
              name="cached"
              required
              inputMode="decimal"
              pattern={FACTOR.source.slice(1, -1)}
              value={form.cached}
              onInput={set('cached')}
            />
          </Field>
          <Field label="Max output tokens">
            <input name="maxOutputTokens" type="number" min={1} required value={form.maxOutputTokens} onInput={set('maxOutputTokens')} />
          </Field>
          <Field label="Asking for more output">
            <select name="outputCapPolicy" value={form.outputCapPolicy} onChange={set('outputCapPolicy')}>
              <option value="clamp">Clamp to the maximum</option>
              <option value="refuse">Refuse (400)</option>
            </select>
          </Field>
        </div>
        <Field label="Allowed models" hint="Exact names or globs with *, separated by spaces or commas; empty: every model">
          <input name="allowedModels" value={form.allowedModels} onInput={set('allowedModels')} />
        </Field>
        <RulesEditor rules={form.rules} onChange={(rules) => setForm({ ...form, rules })} />
      </Form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {list.items?.length === 0 ? (
        <Empty>No strategy yet. Draft one above, publish it, then bind it to a plan below.</Empty>
      ) : (
        <ListTable
          caption="Quota strategies, every version"
          columns={['Key', 'Version', 'Status', 'Units / period', 'In / out / cached', 'Models', 'Actions']}
        >
          {list.items?.map((s) => (
            <tr key={s.id}>
              <td>
                {s.key}
                <div class="id">{s.id}</div>
              </td>
              <td>v{s.version}</td>
              <td>
                <Status value={s.status} />
              </td>
              <td class="numbers">
                {formatNumber(s.quotaUnits)} / {s.resetInterval.toLowerCase()}
              </td>
              <td class="numbers">
                {multiplier(s.inputMultiplierPpm)} / {multiplier(s.outputMultiplierPpm)} / {multiplier(s.cachedInputMultiplierPpm)}
              </td>
              <td>{policyOf(s)}</td>
              <td class="actions">
                {s.status === 'DRAFT' ? (
                  <button type="button" onClick={() => void publish(s)}>
                    Publish {s.key} v{s.version}
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}

function Bindings({
  client,
  plan,
  strategies,
  onChange,
}: {
  client: Client;
  plan: WorkspacePlanDto;
  strategies: QuotaStrategyDto[];
  onChange: () => void;
}) {
  const list = usePaged(
    (cursor) => listPlanStrategyBindings({ client, path: { planId: plan.id }, query: { cursor, limit: 20 } }),
    [plan.id],
  );
  const action = useAction();
  const published = strategies.filter((s) => s.status === 'PUBLISHED');
  const [strategyId, setStrategyId] = useState('');
  const [from, setFrom] = useState(localNow);
  const bind = async () => {
    const chosen = strategyId || published[0]?.id;
    if (!chosen) return;
    if (
      await action.run('Binding…', () =>
        bindPlanStrategy({
          client,
          path: { planId: plan.id },
          body: { strategyId: chosen, effectiveFrom: toInstant(from) },
          headers: { 'Idempotency-Key': idempotencyKey() },
        }),
      )
    ) {
      list.reload();
      onChange();
    }
  };
  const close = async (bindingId: string) => {
    if (
      await action.run('Closing the binding…', () =>
        closePlanStrategyBinding({ client, path: { bindingId }, query: { effectiveAt: new Date().toISOString() } }),
      )
    )
      list.reload();
  };
  const name = (id: string) => {
    const s = strategies.find((x) => x.id === id);
    return s ? `${s.key} v${s.version}` : id;
  };
  return (
    <div class="bindings">
      <h4>Strategy bindings of {plan.name} (history)</h4>
      {published.length ? (
        <Form title={`Bind a strategy to ${plan.name}`} submit="Bind strategy" onSubmit={bind} disabled={!!action.working}>
          <Field label="Published strategy version">
            <select name="strategyId" value={strategyId} onChange={(e) => setStrategyId(valueOf(e))}>
              {published.map((s) => (
                <option key={s.id} value={s.id}>
                  {s.key} v{s.version} ({formatNumber(s.quotaUnits)} units / {s.resetInterval.toLowerCase()})
                </option>
              ))}
            </select>
          </Field>
          <Field label="Effective from (your local time)">
            <input name="effectiveFrom" type="datetime-local" required value={from} onInput={(e) => setFrom(valueOf(e))} />
          </Field>
        </Form>
      ) : (
        <Empty>Publish a strategy version above to bind it to this plan.</Empty>
      )}
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {list.items?.length === 0 ? (
        <Empty>No binding yet: a plan is published once a strategy is bound to it.</Empty>
      ) : (
        <ListTable caption={`Bindings of ${plan.name}`} columns={['Strategy', 'From', 'To', 'Actions']}>
          {list.items?.map((b) => (
            <tr key={b.id}>
              <td>{name(b.strategyId)}</td>
              <td>{when(b.effectiveFrom)}</td>
              <td>{b.effectiveTo ? when(b.effectiveTo) : 'open'}</td>
              <td class="actions">
                {!b.effectiveTo ? (
                  <button type="button" onClick={() => void close(b.id)}>
                    Close now
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </div>
  );
}

const NEW_PLAN = {
  key: '',
  name: '',
  billingInterval: 'MONTH' as 'MONTH' | 'YEAR',
  requestsPerMinute: '',
  tokensPerMinute: '',
  concurrentCalls: '',
};

/** A plan's rate limits in a line. */
function limitsOf(p: WorkspacePlanDto): string {
  const l = p.rateLimits;
  const parts = [
    l.requestsPerMinute ? `${formatNumber(l.requestsPerMinute)} requests/min` : '',
    l.tokensPerMinute ? `${formatNumber(l.tokensPerMinute)} tokens/min` : '',
    l.concurrentCalls ? `${formatNumber(l.concurrentCalls)} at once` : '',
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : 'none';
}

/** The strategy bound to a plan now (getPlan's bindings in force), by name. */
function BoundStrategy({ client, plan, strategies }: { client: Client; plan: WorkspacePlanDto; strategies: QuotaStrategyDto[] }) {
  const [bound, setBound] = useState<string[] | undefined>();
  useRead(
    () =>
      getPlan({ client, path: { planId: plan.id } }).then(
        (res) => res.data.strategyBindings.map((b) => b.strategyId),
        () => [],
      ),
    setBound,
    [plan.id, plan.updatedAt, plan.status],
  );
  if (!bound) return <span class="id">…</span>;
  if (bound.length === 0) return <span class="id">none in force</span>;
  return (
    <>
      {bound.map((id) => {
        const s = strategies.find((x) => x.id === id);
        return <div key={id}>{s ? `${s.key} v${s.version}` : id}</div>;
      })}
    </>
  );
}

export function PlansPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [version, setVersion] = useState(0);
  const [bound, setBound] = useState(0);
  const plans = usePaged((cursor) => listPlans({ client, path: { workspaceId }, query: { cursor, limit: 20 } }), [workspaceId]);
  const strategies = usePaged(
    (_cursor) => listPlanStrategies({ client, path: { workspaceId }, query: { limit: 100 } }),
    [workspaceId, version],
  );
  const action = useAction();
  const [form, setForm] = useState(NEW_PLAN);
  const [open, setOpen] = useState<string | undefined>();
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: valueOf(e) });
  const create = async () => {
    const limit = (v: string) => (v.trim() ? Number(v) : undefined);
    const rateLimits = Object.fromEntries(
      (
        [
          ['requestsPerMinute', limit(form.requestsPerMinute)],
          ['tokensPerMinute', limit(form.tokensPerMinute)],
          ['concurrentCalls', limit(form.concurrentCalls)],
        ] as const
      ).filter(([, v]) => v !== undefined),
    );
    const body = { key: form.key, name: form.name, billingInterval: form.billingInterval, rateLimits };
    const res = await action.run('Drafting the plan…', () =>
      createPlan({ client, path: { workspaceId }, body, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      setForm(NEW_PLAN);
      setOpen(res.data.id);
      plans.reload();
    }
  };
  const publish = async (p: WorkspacePlanDto) => {
    if (await action.run('Publishing the plan…', () => publishPlan({ client, path: { planId: p.id } }))) plans.reload();
  };
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Plans and strategies</h1>
      <Strategies client={client} workspaceId={workspaceId} onChange={() => setVersion((v) => v + 1)} />
      <section aria-labelledby="plans-title">
        <h2 id="plans-title">Plans</h2>
        <p class="lead">A plan is what a user is on: draft it, bind a published strategy from a time, publish it.</p>
        <Form title="Draft a plan" submit="Draft plan" onSubmit={create} disabled={!!action.working}>
          <div class="grid">
            <Field label="Key">
              <input name="planKey" required value={form.key} onInput={set('key')} />
            </Field>
            <Field label="Name">
              <input name="planName" required value={form.name} onInput={set('name')} />
            </Field>
            <Field label="Billing interval">
              <select name="billingInterval" value={form.billingInterval} onChange={set('billingInterval')}>
                <option value="MONTH">Month</option>
                <option value="YEAR">Year</option>
              </select>
            </Field>
          </div>
          <fieldset>
            <legend>Rate limits per user (optional; empty: no limit)</legend>
            <div class="grid">
              <Field label="Requests per minute">
                <input name="requestsPerMinute" type="number" min={1} value={form.requestsPerMinute} onInput={set('requestsPerMinute')} />
              </Field>
              <Field label="Tokens per minute">
                <input name="tokensPerMinute" type="number" min={1} value={form.tokensPerMinute} onInput={set('tokensPerMinute')} />
              </Field>
              <Field label="Concurrent calls">
                <input name="concurrentCalls" type="number" min={1} value={form.concurrentCalls} onInput={set('concurrentCalls')} />
              </Field>
            </div>
          </fieldset>
        </Form>
        <Working label={action.working} />
        <ErrorNote problem={action.problem ?? plans.problem} />
        {plans.items?.length === 0 ? (
          <Empty>No plan yet. Draft one above, bind a published strategy to it, then publish it to provision users on it.</Empty>
        ) : (
          <ListTable caption="Plans" columns={['Plan', 'Status', 'Strategy', 'Rate limits', 'Interval', 'Actions']}>
            {plans.items?.map((p) => (
              <>
                <tr key={p.id}>
                  <td>
                    {p.name} <span class="id">({p.key})</span>
                    <div class="id">{p.id}</div>
                  </td>
                  <td>
                    <Status value={p.status} />
                  </td>
                  <td>
                    <BoundStrategy key={`${p.id}-${bound}`} client={client} plan={p} strategies={strategies.items ?? []} />
                  </td>
                  <td>{limitsOf(p)}</td>
                  <td>{p.billingInterval.toLowerCase()}</td>
                  <td class="actions">
                    <button type="button" aria-expanded={open === p.id} onClick={() => setOpen(open === p.id ? undefined : p.id)}>
                      {open === p.id ? 'Hide bindings' : 'Bindings'}
                    </button>
                    {p.status === 'DRAFT' ? (
                      <button type="button" onClick={() => void publish(p)}>
                        Publish {p.name}
                      </button>
                    ) : null}
                  </td>
                </tr>
                {open === p.id ? (
                  <tr key={`${p.id}-bindings`}>
                    <td colSpan={6}>
                      <Bindings
                        client={client}
                        plan={p}
                        strategies={strategies.items ?? []}
                        onChange={() => {
                          setBound((v) => v + 1);
                          plans.reload();
                        }}
                      />
                    </td>
                  </tr>
                ) : null}
              </>
            ))}
          </ListTable>
        )}
        <Pager list={plans} />
      </section>
    </section>
  );
}
