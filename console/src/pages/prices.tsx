import { useState } from 'preact/hooks';
import {
  closeModelPrice,
  createModelPrice,
  idempotent,
  importModelPrices,
  listModelPrices,
  updateWorkspace,
  type Client,
  type ImportModelPricesResultDto,
  type ModelPriceDto,
  type ProtocolProfile,
} from '../api.js';
import { ActionButton } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { localNow, toInstant, when } from '../format.js';
import { useAction, useFields, useFollowing, usePaged, valueOf, type Action } from '../hooks.js';
import { namesOf, useConnections } from '../lookups.js';
import { ActionNotes, ErrorNote, Field, Form, Input, LocalTimeInput, Notice, Page, Select, type PageProps, Folded } from '../ui.js';

const PROFILES: ProtocolProfile[] = ['openai', 'anthropic', 'azure-openai', 'gemini', 'bedrock'];
/** A price per million tokens as the API takes it: up to 12 digits, and 12 decimals. */
const PRICE = '\\d{1,12}(\\.\\d{1,12})?';

type Scope = 'all' | 'connection' | 'profile';
const NEW_PRICE = {
  modelPattern: '',
  scope: 'all' as Scope,
  providerConnectionId: '',
  protocolProfile: 'openai' as ProtocolProfile,
  input: '',
  cached: '',
  output: '',
  cacheWrite: '',
  reasoning: '',
  from: '',
};
/** The prices of a price's form: its field, its label, its input's name and hint, and whether it is required. */
const PRICES = [
  ['input', 'Input', 'inputPerMillion', undefined, true],
  ['cached', 'Cached input', 'cachedInputPerMillion', 'Empty: as input', false],
  ['output', 'Output', 'outputPerMillion', undefined, true],
  ['cacheWrite', 'Cache write', 'cacheWritePerMillion', 'Optional', false],
  ['reasoning', 'Reasoning', 'reasoningPerMillion', 'Optional', false],
] as const;

/** The workspace's currency: every price, cost and budget is in it; it cannot change once there are prices. */
function Currency(props: { client: Client; workspaceId: string; currency: string; onChange: (c: string) => void }) {
  const { client, workspaceId, currency } = props;
  const [value, setValue] = useFollowing(currency);
  const action = useAction();
  const save = async () => {
    const res = await action.run('Setting the currency…', () =>
      updateWorkspace({ client, path: { workspaceId }, body: { currency: value.trim().toUpperCase() } }),
    );
    if (res) props.onChange(res.data.currency ?? 'USD');
  };
  return (
    <>
      <Form operation="updateWorkspace" title="Workspace currency" submit="Set currency" onSubmit={save} disabled={!!action.working}>
        <Input
          label="Currency"
          hint="ISO 4217 (USD, EUR…); it cannot change once the workspace has prices"
          name="currency"
          required
          pattern="[A-Za-z]{3}"
          maxLength={3}
          value={value}
          onInput={(e) => setValue(valueOf(e))}
        />
      </Form>
      <ErrorNote problem={action.problem} />
    </>
  );
}

/** LiteLLM's JSON as typed: an object of model → prices, or the error that says why it is not. */
function pricesOf(text: string): Record<string, unknown> {
  let prices: unknown;
  try {
    prices = JSON.parse(text);
  } catch (err) {
    throw new Error(`The prices are not JSON: ${(err as Error).message}`, { cause: err });
  }
  if (typeof prices !== 'object' || prices === null || Array.isArray(prices))
    throw new Error("The prices must be LiteLLM's JSON object of model → prices.");
  return prices as Record<string, unknown>;
}

/** LiteLLM's model_prices_and_context_window.json, pasted or read from a file, loaded in one call. */
function Import({ client, workspaceId, onDone }: { client: Client; workspaceId: string; onDone: () => void }) {
  const [text, setText] = useState('');
  const [from, setFrom] = useState('');
  const [result, setResult] = useState<ImportModelPricesResultDto | undefined>();
  const action = useAction();
  const read = async (e: Event) => {
    const file = (e.currentTarget as HTMLInputElement).files?.[0];
    if (file) setText(await file.text());
  };
  const load = async () => {
    setResult(undefined);
    const res = await action.run('Importing…', () => {
      const body = { prices: pricesOf(text), ...(from ? { effectiveFrom: toInstant(from) } : {}) };
      return importModelPrices({ client, path: { workspaceId }, body, headers: idempotent() });
    });
    if (res) {
      setResult(res.data);
      setText('');
      onDone();
    }
  };
  const skipped = result?.skipped ?? [];
  const notPriced = skipped.length
    ? `; skipped ${skipped.length} not priced per token (${skipped.slice(0, 5).join(', ')}${skipped.length > 5 ? '…' : ''})`
    : '';
  const imported = result ? `Imported ${result.created} price${result.created === 1 ? '' : 's'}${notPriced}.` : undefined;
  return (
    <details class="card">
      <summary>Import LiteLLM's price file</summary>
      <Form operation="importModelPrices" title="Import LiteLLM prices" submit="Import prices" onSubmit={load} disabled={!!action.working}>
        <p class="lead">
          Paste or upload LiteLLM's <code>model_prices_and_context_window.json</code> (USD per token): each entry priced per token becomes a
          price per million tokens, for every connection. The workspace's currency must be USD.
        </p>
        <Input label="File" type="file" name="pricesFile" accept=".json,application/json" onChange={(e) => void read(e)} />
        <Field label="Prices JSON">
          <textarea name="prices" rows={6} required value={text} onInput={(e) => setText(valueOf(e))} />
        </Field>
        <LocalTimeInput label="Effective from" hint="Empty: now" name="importFrom" value={from} onInput={(e) => setFrom(valueOf(e))} />
      </Form>
      <ErrorNote problem={action.problem} />
      <Notice text={imported} />
    </details>
  );
}

/** The form that adds a price to the book: its model pattern, what it is for, its prices per million, and from when. */
function PriceForm(props: {
  client: Client;
  workspaceId: string;
  currency: string;
  names: Record<string, string>;
  action: Action;
  onAdded: () => void;
}) {
  const { client, workspaceId, currency, action } = props;
  const { values: form, bind, bindChange, reset } = useFields(() => ({ ...NEW_PRICE, from: localNow() }));
  const create = async () => {
    const optional = (field: 'cached' | 'cacheWrite' | 'reasoning', key: string) =>
      form[field].trim() ? { [key]: form[field].trim() } : {};
    const body = {
      modelPattern: form.modelPattern.trim(),
      ...(form.scope === 'connection' ? { providerConnectionId: form.providerConnectionId } : {}),
      ...(form.scope === 'profile' ? { protocolProfile: form.protocolProfile } : {}),
      inputPerMillion: form.input.trim(),
      outputPerMillion: form.output.trim(),
      ...optional('cached', 'cachedInputPerMillion'),
      ...optional('cacheWrite', 'cacheWritePerMillion'),
      ...optional('reasoning', 'reasoningPerMillion'),
      effectiveFrom: toInstant(form.from),
    };
    if (await action.run('Adding the price…', () => createModelPrice({ client, path: { workspaceId }, body, headers: idempotent() }))) {
      reset();
      props.onAdded();
    }
  };
  return (
    <Form operation="createModelPrice" title="Add a price" submit="Add price" onSubmit={create} disabled={!!action.working}>
      <div class="grid">
        <Input
          label="Model pattern"
          hint="An exact model or a glob with * (gpt-4o-mini*)"
          name="modelPattern"
          required
          {...bind('modelPattern')}
        />
        <Select
          label="For"
          name="scope"
          choices={{ all: 'Every connection', connection: 'One connection', profile: 'Every connection of a protocol' }}
          {...bindChange('scope')}
        />
        {form.scope === 'connection' ? (
          <Select
            label="Connection"
            name="providerConnectionId"
            required
            choices={{ '': 'Choose…', ...props.names }}
            {...bindChange('providerConnectionId')}
          />
        ) : null}
        {form.scope === 'profile' ? (
          <Select
            label="Protocol"
            name="protocolProfile"
            choices={Object.fromEntries(PROFILES.map((p) => [p, p]))}
            {...bindChange('protocolProfile')}
          />
        ) : null}
        {PRICES.map(([field, label, name, hint, required]) => (
          <Input
            key={field}
            label={`${label} per million (${currency})`}
            hint={hint}
            name={name}
            required={required}
            inputMode="decimal"
            pattern={PRICE}
            {...bind(field)}
          />
        ))}
        <LocalTimeInput label="Effective from" name="effectiveFrom" required {...bind('from')} />
      </div>
    </Form>
  );
}

export function PricesPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [currency, setCurrency] = useState(workspace.currency ?? 'USD');
  const [inForce, setInForce] = useState(false);
  const list = usePaged(
    (page) =>
      listModelPrices({
        client,
        path: { workspaceId },
        query: { ...page, ...(inForce ? { at: new Date().toISOString() } : {}) },
      }),
    [workspaceId, inForce],
  );
  const connections = useConnections(client, workspaceId) ?? [];
  const action = useAction();
  const names = namesOf(connections);

  const scopeOf = (p: ModelPriceDto) =>
    p.providerConnectionId
      ? (names[p.providerConnectionId] ?? p.providerConnectionId)
      : p.protocolProfile
        ? `every ${p.protocolProfile} connection`
        : 'every connection';

  return (
    <Page
      title="Prices"
      lead={
        <>
          What the providers charge you, per million tokens, in the workspace's currency ({currency}). Each call is charged under the price
          in force when it started; usage and budgets add these costs up.
        </>
      }
    >
      <Currency client={client} workspaceId={workspaceId} currency={currency} onChange={setCurrency} />
      <Folded label="New price">
        <PriceForm client={client} workspaceId={workspaceId} currency={currency} names={names} action={action} onAdded={list.reload} />
      </Folded>
      <Import client={client} workspaceId={workspaceId} onDone={list.reload} />
      <ActionNotes action={action} problem={list.problem} />
      <div class="toolbar">
        <label class="check">
          <input type="checkbox" name="inForce" checked={inForce} onChange={(e) => setInForce(e.currentTarget.checked)} />
          Only the prices in force now
        </label>
      </div>
      <PagedTable
        list={list}
        caption="Price book"
        columns={['Model pattern', 'For', 'Input / cached / output per million', 'From', 'To', 'Source', 'Actions']}
        empty={
          inForce
            ? 'No price is in force now.'
            : 'No price yet. Add one above, or import LiteLLM’s file: calls without a price have no cost.'
        }
        row={(p) => (
          <tr>
            <td>
              <code>{p.modelPattern}</code>
              <div class="id">{p.id}</div>
            </td>
            <td>{scopeOf(p)}</td>
            <td class="numbers">
              {p.inputPerMillion} / {p.cachedInputPerMillion ?? p.inputPerMillion} / {p.outputPerMillion} {p.currency}
              {p.cacheWritePerMillion ? <div class="id">cache write {p.cacheWritePerMillion}</div> : null}
              {p.reasoningPerMillion ? <div class="id">reasoning {p.reasoningPerMillion}</div> : null}
            </td>
            <td>{when(p.effectiveFrom)}</td>
            <td>{p.effectiveTo ? when(p.effectiveTo) : 'open'}</td>
            <td>{p.source}</td>
            <td class="actions">
              {!p.effectiveTo ? (
                <ActionButton
                  operation="closeModelPrice"
                  action={action}
                  confirm={`Close the price of ${p.modelPattern} now? Calls from now are not charged under it; calls recorded keep their cost.`}
                  label="Closing the price…"
                  call={() => closeModelPrice({ client, path: { priceId: p.id }, body: {}, headers: idempotent() })}
                  onDone={list.reload}
                >
                  Close {p.modelPattern}
                </ActionButton>
              ) : null}
            </td>
          </tr>
        )}
      />
    </Page>
  );
}
