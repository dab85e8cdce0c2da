import { useEffect, useState } from 'preact/hooks';
import {
  closeModelPrice,
  createModelPrice,
  idempotencyKey,
  importModelPrices,
  listModelPrices,
  listProviderConnections,
  updateWorkspace,
  type ImportModelPricesResultDto,
  type ModelPriceDto,
  type ProtocolProfile,
  type ProviderConnectionDto,
} from '../api.js';
import type { PageProps } from '../main.js';
import {
  Empty,
  ErrorNote,
  Field,
  Form,
  ListTable,
  localNow,
  Pager,
  useAction,
  usePaged,
  valueOf,
  when,
  Working,
  toInstant,
} from '../ui.js';

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

/** The workspace's currency: every price, cost and budget is in it; it cannot change once there are prices. */
function Currency({
  client,
  workspaceId,
  currency,
  onChange,
}: {
  client: PageProps['client'];
  workspaceId: string;
  currency: string;
  onChange: (c: string) => void;
}) {
  const [value, setValue] = useState(currency);
  const action = useAction();
  useEffect(() => setValue(currency), [currency]);
  const save = async () => {
    const res = await action.run('Setting the currency…', () =>
      updateWorkspace({ client, path: { workspaceId }, body: { currency: value.trim().toUpperCase() } }),
    );
    if (res) onChange(res.data.currency ?? 'USD');
  };
  return (
    <>
      <Form title="Workspace currency" submit="Set currency" onSubmit={save} disabled={!!action.working}>
        <Field label="Currency" hint="ISO 4217 (USD, EUR…); it cannot change once the workspace has prices">
          <input name="currency" required pattern="[A-Za-z]{3}" maxLength={3} value={value} onInput={(e) => setValue(valueOf(e))} />
        </Field>
      </Form>
      <ErrorNote problem={action.problem} />
    </>
  );
}

/** LiteLLM's model_prices_and_context_window.json, pasted or read from a file, loaded in one call. */
function Import({ client, workspaceId, onDone }: { client: PageProps['client']; workspaceId: string; onDone: () => void }) {
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
      let prices: unknown;
      try {
        prices = JSON.parse(text);
      } catch (err) {
        throw new Error(`The prices are not JSON: ${(err as Error).message}`, { cause: err });
      }
      if (typeof prices !== 'object' || prices === null || Array.isArray(prices))
        throw new Error("The prices must be LiteLLM's JSON object of model → prices.");
      return importModelPrices({
        client,
        path: { workspaceId },
        body: { prices: prices as Record<string, unknown>, ...(from ? { effectiveFrom: toInstant(from) } : {}) },
        headers: { 'Idempotency-Key': idempotencyKey() },
      });
    });
    if (res) {
      setResult(res.data);
      setText('');
      onDone();
    }
  };
  return (
    <details class="card">
      <summary>Import LiteLLM's price file</summary>
      <Form title="Import LiteLLM prices" submit="Import prices" onSubmit={load} disabled={!!action.working}>
        <p class="lead">
          Paste or upload LiteLLM's <code>model_prices_and_context_window.json</code> (USD per token): each entry priced per token becomes a
          price per million tokens, for every connection. The workspace's currency must be USD.
        </p>
        <Field label="File">
          <input type="file" name="pricesFile" accept=".json,application/json" onChange={(e) => void read(e)} />
        </Field>
        <Field label="Prices JSON">
          <textarea name="prices" rows={6} required value={text} onInput={(e) => setText(valueOf(e))} />
        </Field>
        <Field label="Effective from (your local time)" hint="Empty: now">
          <input name="importFrom" type="datetime-local" value={from} onInput={(e) => setFrom(valueOf(e))} />
        </Field>
      </Form>
      <ErrorNote problem={action.problem} />
      {result ? (
        <p role="status">
          Imported {result.created} price{result.created === 1 ? '' : 's'}
          {result.skipped.length
            ? `; skipped ${result.skipped.length} not priced per token (${result.skipped.slice(0, 5).join(', ')}${result.skipped.length > 5 ? '…' : ''})`
            : ''}
          .
        </p>
      ) : null}
    </details>
  );
}

export function PricesPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [currency, setCurrency] = useState(workspace.currency ?? 'USD');
  const [inForce, setInForce] = useState(false);
  const list = usePaged(
    (cursor) =>
      listModelPrices({
        client,
        path: { workspaceId },
        query: { cursor, limit: 20, ...(inForce ? { at: new Date().toISOString() } : {}) },
      }),
    [workspaceId, inForce],
  );
  const [connections, setConnections] = useState<ProviderConnectionDto[]>([]);
  const [form, setForm] = useState(() => ({ ...NEW_PRICE, from: localNow() }));
  const action = useAction();
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: valueOf(e) });
  useEffect(() => {
    listProviderConnections({ client, path: { workspaceId }, query: { limit: 100 } }).then(
      (page) => setConnections(page.data),
      () => setConnections([]),
    );
  }, [workspaceId]);
  const names = Object.fromEntries(connections.map((c) => [c.id, c.name]));

  const create = async () => {
    const body = {
      modelPattern: form.modelPattern.trim(),
      ...(form.scope === 'connection' ? { providerConnectionId: form.providerConnectionId } : {}),
      ...(form.scope === 'profile' ? { protocolProfile: form.protocolProfile } : {}),
      inputPerMillion: form.input.trim(),
      outputPerMillion: form.output.trim(),
      ...(form.cached.trim() ? { cachedInputPerMillion: form.cached.trim() } : {}),
      ...(form.cacheWrite.trim() ? { cacheWritePerMillion: form.cacheWrite.trim() } : {}),
      ...(form.reasoning.trim() ? { reasoningPerMillion: form.reasoning.trim() } : {}),
      effectiveFrom: toInstant(form.from),
    };
    const res = await action.run('Adding the price…', () =>
      createModelPrice({ client, path: { workspaceId }, body, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      setForm({ ...NEW_PRICE, from: localNow() });
      list.reload();
    }
  };
  const close = async (p: ModelPriceDto) => {
    if (
      !window.confirm(`Close the price of ${p.modelPattern} now? Calls from now are not charged under it; calls recorded keep their cost.`)
    )
      return;
    if (
      await action.run('Closing the price…', () =>
        closeModelPrice({ client, path: { priceId: p.id }, body: {}, headers: { 'Idempotency-Key': idempotencyKey() } }),
      )
    )
      list.reload();
  };
  const scopeOf = (p: ModelPriceDto) =>
    p.providerConnectionId
      ? (names[p.providerConnectionId] ?? p.providerConnectionId)
      : p.protocolProfile
        ? `every ${p.protocolProfile} connection`
        : 'every connection';

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Prices</h1>
      <p class="lead">
        What the providers charge you, per million tokens, in the workspace's currency ({currency}). Each call is charged under the price in
        force when it started; usage and budgets add these costs up.
      </p>
      <Currency client={client} workspaceId={workspaceId} currency={currency} onChange={setCurrency} />
      <Form title="Add a price" submit="Add price" onSubmit={create} disabled={!!action.working}>
        <div class="grid">
          <Field label="Model pattern" hint="An exact model or a glob with * (gpt-4o-mini*)">
            <input name="modelPattern" required value={form.modelPattern} onInput={set('modelPattern')} />
          </Field>
          <Field label="For">
            <select name="scope" value={form.scope} onChange={set('scope')}>
              <option value="all">Every connection</option>
              <option value="connection">One connection</option>
              <option value="profile">Every connection of a protocol</option>
            </select>
          </Field>
          {form.scope === 'connection' ? (
            <Field label="Connection">
              <select name="providerConnectionId" required value={form.providerConnectionId} onChange={set('providerConnectionId')}>
                <option value="">Choose…</option>
                {connections.map((c) => (
                  <option key={c.id} value={c.id}>
                    {c.name}
                  </option>
                ))}
              </select>
            </Field>
          ) : null}
          {form.scope === 'profile' ? (
            <Field label="Protocol">
              <select name="protocolProfile" value={form.protocolProfile} onChange={set('protocolProfile')}>
                {PROFILES.map((p) => (
                  <option key={p} value={p}>
                    {p}
                  </option>
                ))}
              </select>
            </Field>
          ) : null}
          <Field label={`Input per million (${currency})`}>
            <input name="inputPerMillion" required inputMode="decimal" pattern={PRICE} value={form.input} onInput={set('input')} />
          </Field>
          <Field label={`Cached input per million (${currency})`} hint="Empty: as input">
            <input name="cachedInputPerMillion" inputMode="decimal" pattern={PRICE} value={form.cached} onInput={set('cached')} />
          </Field>
          <Field label={`Output per million (${currency})`}>
            <input name="outputPerMillion" required inputMode="decimal" pattern={PRICE} value={form.output} onInput={set('output')} />
          </Field>
          <Field label={`Cache write per million (${currency})`} hint="Optional">
            <input name="cacheWritePerMillion" inputMode="decimal" pattern={PRICE} value={form.cacheWrite} onInput={set('cacheWrite')} />
          </Field>
          <Field label={`Reasoning per million (${currency})`} hint="Optional">
            <input name="reasoningPerMillion" inputMode="decimal" pattern={PRICE} value={form.reasoning} onInput={set('reasoning')} />
          </Field>
          <Field label="Effective from (your local time)">
            <input name="effectiveFrom" type="datetime-local" required value={form.from} onInput={set('from')} />
          </Field>
        </div>
      </Form>
      <Import client={client} workspaceId={workspaceId} onDone={list.reload} />
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      <div class="toolbar">
        <label class="check">
          <input type="checkbox" name="inForce" checked={inForce} onChange={(e) => setInForce(e.currentTarget.checked)} />
          Only the prices in force now
        </label>
      </div>
      {list.items?.length === 0 ? (
        <Empty>
          {inForce
            ? 'No price is in force now.'
            : 'No price yet. Add one above, or import LiteLLM’s file: calls without a price have no cost.'}
        </Empty>
      ) : (
        <ListTable
          caption="Price book"
          columns={['Model pattern', 'For', 'Input / cached / output per million', 'From', 'To', 'Source', 'Actions']}
        >
          {list.items?.map((p) => (
            <tr key={p.id}>
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
                  <button type="button" onClick={() => void close(p)}>
                    Close {p.modelPattern}
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
