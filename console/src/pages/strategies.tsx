/** The quota strategies of the plans page: what a period grants and what a token costs, drafted and published by version. */
import {
  createQuotaStrategy,
  idempotent,
  listPlanStrategies,
  publishPlanStrategy,
  type Client,
  type Int64String,
  type QuotaStrategyDto,
} from '../api.js';
import { ActionButton } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { formatNumber, multiplier } from '../format.js';
import { useAction, useFields, usePaged, valueOf } from '../hooks.js';
import { ActionNotes, Field, Form, Input, Select, Status } from '../ui.js';

const int64 = (v: string) => v as Int64String;

/** A strategy's reset interval, and a plan's billing interval. */
export const INTERVALS = { MONTH: 'Month', YEAR: 'Year' };

/** A factor as typed (1, 4, 0.25; at most six decimals) in parts per million, exactly: 0.25 → 250000. */
const FACTOR = '\\d{1,12}(?:\\.\\d{1,6})?';
function ppmOf(factor: string): Int64String {
  const [whole, fraction = ''] = factor.trim().split('.');
  return int64(String(BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, '0'))));
}

/** A factor's input: a decimal with at most six decimals. */
function FactorInput(props: { label: string; hint?: string; name?: string; value: string; onInput: (e: Event) => void }) {
  return <Input required inputMode="decimal" pattern={FACTOR} {...props} />;
}

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
          <Input label="Model pattern" hint="An exact name or a glob with *" required value={r.pattern} onInput={edit(i, 'pattern')} />
          <FactorInput label="Input ×" value={r.input} onInput={edit(i, 'input')} />
          <FactorInput label="Cached input ×" value={r.cached} onInput={edit(i, 'cached')} />
          <FactorInput label="Output ×" value={r.output} onInput={edit(i, 'output')} />
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

/** The strategy the form drafts, as the API takes it. */
function strategyOf(form: typeof NEW_STRATEGY) {
  const allowed = form.allowedModels
    .split(/[\s,]+/)
    .map((m) => m.trim())
    .filter(Boolean);
  return {
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
}

export function Strategies({ client, workspaceId, onChange }: { client: Client; workspaceId: string; onChange: () => void }) {
  const list = usePaged((page) => listPlanStrategies({ client, path: { workspaceId }, query: page }), [workspaceId]);
  const action = useAction();
  const { values: form, bind, bindChange, put, reset } = useFields(NEW_STRATEGY);
  const changed = () => {
    list.reload();
    onChange();
  };
  const create = async () => {
    const body = strategyOf(form);
    if (
      await action.run('Drafting the strategy…', () => createQuotaStrategy({ client, path: { workspaceId }, body, headers: idempotent() }))
    ) {
      // Drafted: the form starts again, so the next draft is not this one by accident.
      reset();
      changed();
    }
  };
  return (
    <section aria-labelledby="strategies-title">
      <h2 id="strategies-title">Quota strategies</h2>
      <p class="lead">
        A strategy says how many units a period grants and what a token costs. A new draft of an existing key is its next version; a
        published version never changes.
      </p>
      <Form
        fold="New quota strategy"
        operation="createQuotaStrategy"
        title="Draft a quota strategy"
        submit="Draft strategy"
        onSubmit={create}
        disabled={!!action.working}
      >
        <div class="grid">
          <Input label="Key" hint="The same key again drafts its next version" name="strategyKey" required {...bind('key')} />
          <Select label="Reset every" name="resetInterval" choices={INTERVALS} {...bindChange('resetInterval')} />
          <Input label="Units per period" name="quotaUnits" required inputMode="numeric" pattern="[0-9]+" {...bind('quotaUnits')} />
          <FactorInput
            label="Input token ×"
            hint="Units per token: 1 = one unit a token, 0.25 = a quarter"
            name="input"
            {...bind('input')}
          />
          <FactorInput label="Output token ×" name="output" {...bind('output')} />
          <FactorInput label="Cached input token ×" name="cached" {...bind('cached')} />
          <Input label="Max output tokens" name="maxOutputTokens" type="number" min={1} required {...bind('maxOutputTokens')} />
          <Select
            label="Asking for more output"
            name="outputCapPolicy"
            choices={{ clamp: 'Clamp to the maximum', refuse: 'Refuse (400)' }}
            {...bindChange('outputCapPolicy')}
          />
        </div>
        <Field label="Allowed models" hint="Exact names or globs with *, separated by spaces or commas; empty: every model">
          <input name="allowedModels" {...bind('allowedModels')} />
        </Field>
        <RulesEditor rules={form.rules} onChange={(rules) => put({ rules })} />
      </Form>
      <ActionNotes action={action} problem={list.problem} />
      <PagedTable
        list={list}
        caption="Quota strategies, every version"
        columns={['Key', 'Version', 'Status', 'Units / period', 'In / out / cached', 'Models', 'Actions']}
        empty="No strategy yet. Draft one above, publish it, then bind it to a plan below."
        row={(s) => (
          <tr>
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
                <ActionButton
                  operation="publishPlanStrategy"
                  action={action}
                  label="Publishing…"
                  call={() => publishPlanStrategy({ client, path: { strategyId: s.id } })}
                  onDone={changed}
                >
                  Publish {s.key} v{s.version}
                </ActionButton>
              ) : null}
            </td>
          </tr>
        )}
      />
    </section>
  );
}
