import { useState } from 'preact/hooks';
import {
  bindPlanStrategy,
  closePlanStrategyBinding,
  createPlan,
  createQuotaStrategy,
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
import { Empty, ErrorNote, Field, Form, Pager, Status, usePaged, useAction, valueOf, when, Working, ListTable } from '../ui.js';

/** A datetime-local input's value (the operator's local time) as RFC 3339 UTC. */
const toInstant = (local: string) => new Date(local).toISOString();
const localNow = () => {
  const d = new Date();
  d.setSeconds(0, 0);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
const int64 = (v: string) => v as Int64String;

function Strategies({ client, workspaceId, onChange }: { client: Client; workspaceId: string; onChange: () => void }) {
  const list = usePaged((cursor) => listPlanStrategies({ client, path: { workspaceId }, query: { cursor, limit: 20 } }), [workspaceId]);
  const action = useAction();
  const [form, setForm] = useState({
    key: '',
    resetInterval: 'MONTH' as 'MONTH' | 'YEAR',
    quotaUnits: '100000',
    inputMultiplierPpm: '1000000',
    outputMultiplierPpm: '1000000',
    cachedInputMultiplierPpm: '1000000',
    maxOutputTokens: '4096',
  });
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: valueOf(e) });
  const create = async () => {
    const body = {
      key: form.key,
      resetInterval: form.resetInterval,
      quotaUnits: int64(form.quotaUnits),
      inputMultiplierPpm: int64(form.inputMultiplierPpm),
      outputMultiplierPpm: int64(form.outputMultiplierPpm),
      cachedInputMultiplierPpm: int64(form.cachedInputMultiplierPpm),
      maxOutputTokens: Number(form.maxOutputTokens),
    };
    if (
      await action.run('Drafting the strategy…', () =>
        createQuotaStrategy({ client, path: { workspaceId }, body, headers: { 'Idempotency-Key': idempotencyKey() } }),
      )
    ) {
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
          <Field label="Input tokens (ppm)" hint="1000000 = 1 unit a token">
            <input
              name="inputMultiplierPpm"
              required
              inputMode="numeric"
              pattern="[0-9]+"
              value={form.inputMultiplierPpm}
              onInput={set('inputMultiplierPpm')}
            />
          </Field>
          <Field label="Output tokens (ppm)">
            <input
              name="outputMultiplierPpm"
              required
              inputMode="numeric"
              pattern="[0-9]+"
              value={form.outputMultiplierPpm}
              onInput={set('outputMultiplierPpm')}
            />
          </Field>
          <Field label="Cached input tokens (ppm)">
            <input
              name="cachedInputMultiplierPpm"
              required
              inputMode="numeric"
              pattern="[0-9]+"
              value={form.cachedInputMultiplierPpm}
              onInput={set('cachedInputMultiplierPpm')}
            />
          </Field>
          <Field label="Max output tokens">
            <input name="maxOutputTokens" type="number" min={1} required value={form.maxOutputTokens} onInput={set('maxOutputTokens')} />
          </Field>
        </div>
      </Form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {list.items?.length === 0 ? (
        <Empty>No strategy yet. Draft one above, publish it, then bind it to a plan below.</Empty>
      ) : (
        <ListTable
          caption="Quota strategies, every version"
          columns={['Key', 'Version', 'Status', 'Units / period', 'In / out / cached (ppm)', 'Actions']}
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
              <td>
                {s.quotaUnits} / {s.resetInterval.toLowerCase()}
              </td>
              <td>
                {s.inputMultiplierPpm} / {s.outputMultiplierPpm} / {s.cachedInputMultiplierPpm}
              </td>
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
                  {s.key} v{s.version} ({s.quotaUnits} units / {s.resetInterval.toLowerCase()})
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

export function PlansPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [version, setVersion] = useState(0);
  const plans = usePaged((cursor) => listPlans({ client, path: { workspaceId }, query: { cursor, limit: 20 } }), [workspaceId]);
  const strategies = usePaged(
    (_cursor) => listPlanStrategies({ client, path: { workspaceId }, query: { limit: 100 } }),
    [workspaceId, version],
  );
  const action = useAction();
  const [form, setForm] = useState({ key: '', name: '', billingInterval: 'MONTH' as 'MONTH' | 'YEAR' });
  const [open, setOpen] = useState<string | undefined>();
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: valueOf(e) });
  const create = async () => {
    const res = await action.run('Drafting the plan…', () =>
      createPlan({ client, path: { workspaceId }, body: form, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      setForm({ key: '', name: '', billingInterval: 'MONTH' });
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
        </Form>
        <Working label={action.working} />
        <ErrorNote problem={action.problem ?? plans.problem} />
        {plans.items?.length === 0 ? (
          <Empty>No plan yet. Draft one above, bind a published strategy to it, then publish it to provision users on it.</Empty>
        ) : (
          <ListTable caption="Plans" columns={['Plan', 'Status', 'Interval', 'Actions']}>
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
                    <td colSpan={4}>
                      <Bindings client={client} plan={p} strategies={strategies.items ?? []} onChange={plans.reload} />
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
