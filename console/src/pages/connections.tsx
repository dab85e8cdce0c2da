import { useState } from 'preact/hooks';
import {
  archiveProviderConnection,
  createProviderConnection,
  idempotencyKey,
  listProviderConnections,
  rotateProviderSecret,
  testProviderConnection,
  updateProviderConnection,
  verifyProviderConnection,
  type ProviderConnectionDto,
} from '../api.js';
import type { PageProps } from '../main.js';
import { Empty, ErrorNote, Field, Form, Pager, Status, usePaged, useAction, valueOf, when, Working, ListTable } from '../ui.js';

type Profile = 'openai' | 'anthropic';

export function ConnectionsPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const list = usePaged(
    (cursor) => listProviderConnections({ client, path: { workspaceId }, query: { cursor, limit: 20 } }),
    [workspaceId],
  );
  const action = useAction();
  const [form, setForm] = useState({ name: '', protocolProfile: 'openai' as Profile, baseUrl: '', apiKey: '' });
  const [outcome, setOutcome] = useState<string | undefined>();
  const [rotating, setRotating] = useState<{ id: string; apiKey: string } | undefined>();
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: valueOf(e) });

  const test = async () => {
    setOutcome(undefined);
    const res = await action.run('Testing the upstream (a call to its models endpoint)…', () =>
      testProviderConnection({
        client,
        path: { workspaceId },
        body: { protocolProfile: form.protocolProfile, baseUrl: form.baseUrl, apiKey: form.apiKey },
      }),
    );
    if (res)
      setOutcome(`Test: ${res.data.outcome}${res.data.httpStatus ? ` (HTTP ${res.data.httpStatus})` : ''} in ${res.data.latencyMs} ms`);
  };
  const create = async () => {
    const res = await action.run('Creating the connection…', () =>
      createProviderConnection({ client, path: { workspaceId }, body: form, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      setForm({ name: '', protocolProfile: 'openai', baseUrl: '', apiKey: '' });
      setOutcome(`Created ${res.data.name}: gateway base URL ${res.data.gatewayBaseUrl}`);
      list.reload();
    }
  };
  const verify = async (c: ProviderConnectionDto) => {
    const res = await action.run(`Verifying ${c.name}…`, () => verifyProviderConnection({ client, path: { providerConnectionId: c.id } }));
    if (res) {
      setOutcome(
        `Verify ${c.name}: ${res.data.outcome}${res.data.httpStatus ? ` (HTTP ${res.data.httpStatus})` : ''} in ${res.data.latencyMs} ms`,
      );
      list.reload();
    }
  };
  const setStatus = async (c: ProviderConnectionDto, status: 'ACTIVE' | 'SUSPENDED') => {
    if (
      await action.run(status === 'SUSPENDED' ? 'Suspending…' : 'Resuming…', () =>
        updateProviderConnection({ client, path: { providerConnectionId: c.id }, body: { status } }),
      )
    )
      list.reload();
  };
  const archive = async (c: ProviderConnectionDto) => {
    if (!window.confirm(`Archive ${c.name}? Gateway calls to it stop for good.`)) return;
    if (await action.run('Archiving…', () => archiveProviderConnection({ client, path: { providerConnectionId: c.id } }))) list.reload();
  };
  const rotate = async () => {
    if (!rotating) return;
    const res = await action.run('Rotating the key…', () =>
      rotateProviderSecret({ client, path: { providerConnectionId: rotating.id }, body: { apiKey: rotating.apiKey } }),
    );
    if (res) {
      setRotating(undefined);
      setOutcome(`Key rotated: now ${res.data.secretPreview}`);
      list.reload();
    }
  };

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Provider connections</h1>
      <p class="lead">
        An upstream provider (its base URL and API key, stored encrypted). Callers reach it at the connection's gateway base URL.
      </p>
      <Form title="Create a connection" submit="Create connection" onSubmit={create} disabled={!!action.working}>
        <Field label="Name">
          <input name="connectionName" required value={form.name} onInput={set('name')} />
        </Field>
        <Field label="Protocol">
          <select name="protocolProfile" value={form.protocolProfile} onChange={set('protocolProfile')}>
            <option value="openai">OpenAI</option>
            <option value="anthropic">Anthropic</option>
          </select>
        </Field>
        <Field label="Upstream base URL" hint="For example https://api.openai.com">
          <input name="baseUrl" type="url" required value={form.baseUrl} onInput={set('baseUrl')} />
        </Field>
        <Field label="Provider API key" hint="Write-only: only a preview is shown afterwards.">
          <input name="providerApiKey" type="password" autoComplete="off" required value={form.apiKey} onInput={set('apiKey')} />
        </Field>
        <button type="button" onClick={() => void test()} disabled={!!action.working || !form.baseUrl || !form.apiKey}>
          Test before saving
        </button>
      </Form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
      {outcome ? (
        <p class="notice" role="status">
          {outcome}
        </p>
      ) : null}
      {rotating ? (
        <Form title="Rotate the provider key" submit="Rotate key" onSubmit={rotate} disabled={!!action.working}>
          <Field label="New provider API key">
            <input
              type="password"
              autoComplete="off"
              required
              value={rotating.apiKey}
              onInput={(e) => setRotating({ ...rotating, apiKey: valueOf(e) })}
            />
          </Field>
          <button type="button" onClick={() => setRotating(undefined)}>
            Cancel
          </button>
        </Form>
      ) : null}
      <ErrorNote problem={list.problem} />
      {list.items?.length === 0 ? (
        <Empty>
          No provider connection yet. Create one above with your provider's base URL and key; then make a plan in Plans and strategies.
        </Empty>
      ) : (
        <ListTable caption="Provider connections" columns={['Name', 'Status', 'Gateway base URL', 'Key', 'Verified', 'Actions']}>
          {list.items?.map((c) => (
            <tr key={c.id}>
              <td>
                {c.name}
                <div class="id">
                  {c.protocolProfile} → {c.baseUrl}
                </div>
              </td>
              <td>
                <Status value={c.status} />
              </td>
              <td>
                <code>{c.gatewayBaseUrl}</code>
              </td>
              <td>
                <code>{c.secretPreview}</code>
              </td>
              <td>{when(c.lastVerifiedAt)}</td>
              <td class="actions">
                {c.status !== 'ARCHIVED' ? (
                  <>
                    <button type="button" onClick={() => void verify(c)}>
                      Verify
                    </button>
                    <button type="button" onClick={() => setRotating({ id: c.id, apiKey: '' })}>
                      Rotate key
                    </button>
                    {c.status === 'ACTIVE' ? (
                      <button type="button" onClick={() => void setStatus(c, 'SUSPENDED')}>
                        Suspend
                      </button>
                    ) : (
                      <button type="button" onClick={() => void setStatus(c, 'ACTIVE')}>
                        Resume
                      </button>
                    )}
                    <button type="button" class="danger" onClick={() => void archive(c)}>
                      Archive
                    </button>
                  </>
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
