import { useState } from 'preact/hooks';
import {
  bindPlanStrategy,
  closePlanStrategyBinding,
  createPlan,
  getPlan,
  idempotent,
  listPlans,
  listPlanStrategies,
  listPlanStrategyBindings,
  publishPlan,
  setPlanPassthroughClasses,
  setPlanRequestLog,
  type Client,
  type PassthroughClass,
  type QuotaStrategyDto,
  type WorkspacePlanDto,
} from '../api.js';
import { ActionButton, ExpandButton, useOpenRow } from '../components/buttons.js';
import { classesLine, PassthroughClassesField } from '../components/passthrough-classes.js';
import { limitsOf, PlanRateLimits, RATE_LIMITS, rateLimitsOf } from '../components/plan-rate-limits.js';
import { policyLine, RequestLogForm } from '../components/request-log-policy.js';
import { PagedTable } from '../components/lists.js';
import { formatNumber, localNow, toInstant, when } from '../format.js';
import { useAction, useFields, usePaged, useRead, valueOf } from '../hooks.js';
import { ActionNotes, Empty, Form, Input, LocalTimeInput, Page, Select, Status, type PageProps } from '../ui.js';
import { INTERVALS, Strategies } from './strategies.js';

/** A strategy version by name: its key and version. */
const nameOf = (strategies: QuotaStrategyDto[], id: string) => {
  const s = strategies.find((x) => x.id === id);
  return s ? `${s.key} v${s.version}` : id;
};

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
  const list = usePaged((page) => listPlanStrategyBindings({ client, path: { planId: plan.id }, query: page }), [plan.id]);
  const action = useAction();
  const published = strategies.filter((s) => s.status === 'PUBLISHED');
  const [strategyId, setStrategyId] = useState('');
  const [from, setFrom] = useState(localNow);
  const bind = async () => {
    const chosen = strategyId || published[0]?.id;
    if (!chosen) return;
    const body = { strategyId: chosen, effectiveFrom: toInstant(from) };
    if (await action.run('Binding…', () => bindPlanStrategy({ client, path: { planId: plan.id }, body, headers: idempotent() }))) {
      list.reload();
      onChange();
    }
  };
  return (
    <div class="bindings">
      <h4>Strategy bindings of {plan.name} (history)</h4>
      {published.length ? (
        <Form
          operation="bindPlanStrategy"
          title={`Bind a strategy to ${plan.name}`}
          submit="Bind strategy"
          onSubmit={bind}
          disabled={!!action.working}
        >
          <Select
            label="Published strategy version"
            name="strategyId"
            choices={Object.fromEntries(
              published.map((s) => [
                s.id,
                `${s.key} v${s.version} (${formatNumber(s.quotaUnits)} units / ${s.resetInterval.toLowerCase()})`,
              ]),
            )}
            value={strategyId}
            onChange={(e) => setStrategyId(valueOf(e))}
          />
          <LocalTimeInput label="Effective from" name="effectiveFrom" required value={from} onInput={(e) => setFrom(valueOf(e))} />
        </Form>
      ) : (
        <Empty>Publish a strategy version above to bind it to this plan.</Empty>
      )}
      <ActionNotes action={action} problem={list.problem} />
      <PagedTable
        list={list}
        caption={`Bindings of ${plan.name}`}
        columns={['Strategy', 'From', 'To', 'Actions']}
        empty="No binding yet: a plan is published once a strategy is bound to it."
        row={(b) => (
          <tr>
            <td>{nameOf(strategies, b.strategyId)}</td>
            <td>{when(b.effectiveFrom)}</td>
            <td>{b.effectiveTo ? when(b.effectiveTo) : 'open'}</td>
            <td class="actions">
              {!b.effectiveTo ? (
                <ActionButton
                  operation="closePlanStrategyBinding"
                  action={action}
                  label="Closing the binding…"
                  call={() =>
                    closePlanStrategyBinding({ client, path: { bindingId: b.id }, query: { effectiveAt: new Date().toISOString() } })
                  }
                  onDone={list.reload}
                >
                  Close now
                </ActionButton>
              ) : null}
            </td>
          </tr>
        )}
      />
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
  passthroughClasses: [] as PassthroughClass[],
};
/** The plan the form drafts, as the API takes it: the rate limits set, and no other. */
function planOf(form: typeof NEW_PLAN) {
  const rateLimits = rateLimitsOf(form);
  return { key: form.key, name: form.name, billingInterval: form.billingInterval, rateLimits, passthroughClasses: form.passthroughClasses };
}

/** A plan's passthrough classes, replaced whatever its status (setPlanPassthroughClasses). */
function PlanPassthrough({ client, plan, onDone }: { client: Client; plan: WorkspacePlanDto; onDone: () => void }) {
  const [classes, setClasses] = useState<PassthroughClass[]>(plan.passthroughClasses);
  const action = useAction();
  const save = async () => {
    const body = { passthroughClasses: classes };
    if (await action.run('Saving the passthrough classes…', () => setPlanPassthroughClasses({ client, path: { planId: plan.id }, body })))
      onDone();
  };
  return (
    <div class="bindings">
      <Form
        operation="setPlanPassthroughClasses"
        title={`Passthrough classes of ${plan.name}`}
        submit="Save passthrough classes"
        onSubmit={save}
        disabled={!!action.working}
      >
        <PassthroughClassesField
          legend={`Let through for ${plan.name}'s users, beside the workspace's`}
          name="planPassthrough"
          value={classes}
          onChange={setClasses}
        />
      </Form>
      <ActionNotes action={action} />
    </div>
  );
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
      {bound.map((id) => (
        <div key={id}>{nameOf(strategies, id)}</div>
      ))}
    </>
  );
}

export function PlansPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [version, setVersion] = useState(0);
  const [bound, setBound] = useState(0);
  const plans = usePaged((page) => listPlans({ client, path: { workspaceId }, query: page }), [workspaceId]);
  const strategies = usePaged(() => listPlanStrategies({ client, path: { workspaceId }, query: { limit: 100 } }), [workspaceId, version]);
  const action = useAction();
  const { values: form, bind, bindChange, put, reset } = useFields(NEW_PLAN);
  const rows = useOpenRow();
  const passthroughRows = useOpenRow();
  const limitRows = useOpenRow();
  const logRows = useOpenRow();
  const create = async () => {
    const body = planOf(form);
    const res = await action.run('Drafting the plan…', () => createPlan({ client, path: { workspaceId }, body, headers: idempotent() }));
    if (res) {
      reset();
      rows.set(res.data.id);
      plans.reload();
    }
  };
  return (
    <Page title="Plans and strategies">
      <Strategies client={client} workspaceId={workspaceId} onChange={() => setVersion((v) => v + 1)} />
      <section aria-labelledby="plans-title">
        <h2 id="plans-title">Plans</h2>
        <p class="lead">A plan is what a user is on: draft it, bind a published strategy from a time, publish it.</p>
        <Form fold="New plan" operation="createPlan" title="Draft a plan" submit="Draft plan" onSubmit={create} disabled={!!action.working}>
          <div class="grid">
            <Input label="Key" name="planKey" required {...bind('key')} />
            <Input label="Name" name="planName" required {...bind('name')} />
            <Select label="Billing interval" name="billingInterval" choices={INTERVALS} {...bindChange('billingInterval')} />
          </div>
          <fieldset>
            <legend>Rate limits per user (optional; empty: no limit)</legend>
            <div class="grid">
              {RATE_LIMITS.map(([field, label]) => (
                <Input key={field} label={label} name={field} type="number" min={1} {...bind(field)} />
              ))}
            </div>
          </fieldset>
          <PassthroughClassesField
            legend="Passthrough classes (optional; let through for its users, beside the workspace's)"
            name="newPlanPassthrough"
            value={form.passthroughClasses}
            onChange={(passthroughClasses) => put({ passthroughClasses })}
          />
        </Form>
        <ActionNotes action={action} problem={plans.problem} />
        <PagedTable
          list={plans}
          caption="Plans"
          columns={['Plan', 'Status', 'Strategy', 'Rate limits', 'Passthrough', 'Request logs', 'Interval', 'Actions']}
          empty="No plan yet. Draft one above, bind a published strategy to it, then publish it to provision users on it."
          row={(p) => (
            <tr>
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
              <td>{classesLine(p.passthroughClasses)}</td>
              <td>{policyLine(p.requestLog, "the workspace's")}</td>
              <td>{p.billingInterval.toLowerCase()}</td>
              <td class="actions">
                <ExpandButton rows={rows} id={p.id} show="Bindings" hide="Hide bindings" />
                <ExpandButton rows={passthroughRows} id={p.id} show="Passthrough" hide="Hide passthrough" />
                <ExpandButton rows={limitRows} id={p.id} show="Rate limits" hide="Hide rate limits" />
                <ExpandButton rows={logRows} id={p.id} show="Request logs" hide="Hide request logs" />
                {p.status === 'DRAFT' ? (
                  <ActionButton
                    operation="publishPlan"
                    action={action}
                    label="Publishing the plan…"
                    call={() => publishPlan({ client, path: { planId: p.id } })}
                    onDone={plans.reload}
                  >
                    Publish {p.name}
                  </ActionButton>
                ) : null}
              </td>
            </tr>
          )}
          detail={(p) =>
            ![rows, passthroughRows, limitRows, logRows].some((r) => r.is(p.id)) ? null : (
              <>
                {rows.is(p.id) ? (
                  <Bindings
                    client={client}
                    plan={p}
                    strategies={strategies.items ?? []}
                    onChange={() => {
                      setBound((v) => v + 1);
                      plans.reload();
                    }}
                  />
                ) : null}
                {limitRows.is(p.id) ? (
                  <PlanRateLimits
                    key={`${p.id}-${p.updatedAt}`}
                    client={client}
                    plan={p}
                    onDone={() => {
                      limitRows.set(undefined);
                      plans.reload();
                    }}
                  />
                ) : null}
                {logRows.is(p.id) ? (
                  <div class="bindings">
                    <RequestLogForm
                      operation="setPlanRequestLog"
                      title={`Request logs of ${p.name}`}
                      name="planRequestLog"
                      inherit="The workspace's policy"
                      value={p.requestLog}
                      save={(requestLog) => setPlanRequestLog({ client, path: { planId: p.id }, body: { requestLog } })}
                      onSaved={plans.reload}
                    />
                  </div>
                ) : null}
                {passthroughRows.is(p.id) ? (
                  <PlanPassthrough
                    key={`${p.id}-${p.updatedAt}`}
                    client={client}
                    plan={p}
                    onDone={() => {
                      passthroughRows.set(undefined);
                      plans.reload();
                    }}
                  />
                ) : null}
              </>
            )
          }
        />
      </section>
    </Page>
  );
}
