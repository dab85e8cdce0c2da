import { useEffect, useState } from 'preact/hooks';
import {
  configureBillingProviderCredential,
  configureBillingWebhookSecret,
  createBillingConnection,
  createBillingProductMapping,
  deleteBillingProductMapping,
  disableBillingConnection,
  idempotencyKey,
  listBillingConnections,
  listBillingProductMappings,
  listBillingWebhookEvents,
  listExternalSubscriptions,
  listPlans,
  reconcileBillingConnection,
  replayBillingWebhookEvent,
  verifyBillingConnection,
  type BillingConnectionDto,
  type Client,
  type WorkspacePlanDto,
  type WorkspaceUserDto,
} from '../api.js';
import type { PageProps } from '../main.js';
import { Empty, ErrorNote, Field, Form, Pager, Status, usePaged, useAction, UserPicker, valueOf, when, Working, ListTable } from '../ui.js';

type EventStatus = 'RECEIVED' | 'PROCESSING' | 'PROCESSED' | 'IGNORED' | 'FAILED';

function Mappings({ client, connection, plans }: { client: Client; connection: BillingConnectionDto; plans: WorkspacePlanDto[] }) {
  const list = usePaged(
    (cursor) => listBillingProductMappings({ client, path: { connectionId: connection.id }, query: { cursor, limit: 20 } }),
    [connection.id],
  );
  const action = useAction();
  const [form, setForm] = useState({ externalProductId: '', externalPriceId: '', planId: '' });
  const create = async () => {
    const planId = form.planId || plans[0]?.id;
    if (!planId) return;
    const body = {
      externalProductId: form.externalProductId,
      planId,
      ...(form.externalPriceId ? { externalPriceId: form.externalPriceId } : {}),
    };
    if (
      await action.run('Mapping…', () =>
        createBillingProductMapping({
          client,
          path: { connectionId: connection.id },
          body,
          headers: { 'Idempotency-Key': idempotencyKey() },
        }),
      )
    ) {
      setForm({ externalProductId: '', externalPriceId: '', planId: '' });
      list.reload();
    }
  };
  return (
    <div>
      <h4>Product mappings</h4>
      <Form title="Map a product to a plan" submit="Add mapping" onSubmit={create} disabled={!!action.working || plans.length === 0}>
        <div class="grid">
          <Field label="External product id">
            <input required value={form.externalProductId} onInput={(e) => setForm({ ...form, externalProductId: valueOf(e) })} />
          </Field>
          <Field label="External price id (optional)">
            <input value={form.externalPriceId} onInput={(e) => setForm({ ...form, externalPriceId: valueOf(e) })} />
          </Field>
          <Field label="Plan">
            <select value={form.planId || plans[0]?.id} onChange={(e) => setForm({ ...form, planId: valueOf(e) })}>
              {plans.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </Field>
        </div>
      </Form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {list.items?.length === 0 ? (
        <Empty>No mapping: map the provider's product to a plan so its subscriptions give access to it.</Empty>
      ) : (
        <ListTable columns={['Product', 'Price', 'Plan', 'Status', 'Actions']}>
          {list.items?.map((m) => (
            <tr key={m.id}>
              <td>{m.externalProductId}</td>
              <td>{m.externalPriceId ?? '—'}</td>
              <td>{plans.find((p) => p.id === m.planId)?.name ?? m.planId}</td>
              <td>
                <Status value={m.status} />
              </td>
              <td class="actions">
                {m.status === 'ACTIVE' ? (
                  <button
                    type="button"
                    onClick={() =>
                      void action
                        .run('Disabling…', () => deleteBillingProductMapping({ client, path: { mappingId: m.id } }))
                        .then(list.reload)
                    }
                  >
                    Disable
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

function Inbox({ client, connection }: { client: Client; connection: BillingConnectionDto }) {
  const [status, setStatus] = useState<EventStatus | ''>('');
  const list = usePaged(
    (cursor) =>
      listBillingWebhookEvents({
        client,
        path: { connectionId: connection.id },
        query: { cursor, limit: 20, ...(status ? { status } : {}) },
      }),
    [connection.id, status],
  );
  const action = useAction();
  const replay = async (eventId: string) => {
    if (await action.run('Replaying the event…', () => replayBillingWebhookEvent({ client, path: { eventId } }))) list.reload();
  };
  return (
    <div>
      <h4>Webhook inbox</h4>
      <p class="id">Webhook URL for the provider: {connection.webhookUrl}</p>
      <Field label="Status">
        <select value={status} onChange={(e) => setStatus(valueOf(e) as EventStatus | '')}>
          <option value="">Any</option>
          {['RECEIVED', 'PROCESSING', 'PROCESSED', 'IGNORED', 'FAILED'].map((s) => (
            <option key={s} value={s}>
              {s.toLowerCase()}
            </option>
          ))}
        </select>
      </Field>
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {list.items?.length === 0 ? (
        <Empty>
          No webhook event {status ? `with status ${status.toLowerCase()}` : 'received yet'}. Point the provider's webhook at the URL above,
          with the signing secret set here.
        </Empty>
      ) : (
        <ListTable columns={['Type', 'Status', 'Attempts', 'Received', 'Last error', 'Actions']}>
          {list.items?.map((ev) => (
            <tr key={ev.id}>
              <td>
                {ev.type}
                <div class="id">{ev.providerEventId}</div>
              </td>
              <td>
                <Status value={ev.status} />
              </td>
              <td>{ev.attempts}</td>
              <td>{when(ev.receivedAt)}</td>
              <td>{ev.lastError ?? '—'}</td>
              <td class="actions">
                {ev.status === 'FAILED' ? (
                  <button type="button" onClick={() => void replay(ev.id)}>
                    Replay
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

function Subscriptions({ client, workspaceId }: { client: Client; workspaceId: string }) {
  const [user, setUser] = useState<WorkspaceUserDto | undefined>();
  const accessId = user?.access.id ?? '';
  const list = usePaged(
    (cursor) =>
      accessId
        ? listExternalSubscriptions({ client, path: { accessId }, query: { cursor, limit: 20 } })
        : Promise.resolve({ data: [], response: new Response(null) }),
    [accessId],
  );
  return (
    <section aria-labelledby="subs-title">
      <h2 id="subs-title">External subscriptions</h2>
      <UserPicker client={client} workspaceId={workspaceId} chosen={user} onChoose={setUser} />
      <ErrorNote problem={list.problem} />
      {!accessId ? (
        <Empty>Choose a user to see the subscriptions the billing providers report for them.</Empty>
      ) : list.items?.length === 0 ? (
        <Empty>No subscription for this user: one appears when the provider's webhook or a reconciliation reports it.</Empty>
      ) : (
        <ListTable columns={['Subscription', 'Status', 'Period', 'Updated']}>
          {list.items?.map((s) => (
            <tr key={s.id}>
              <td>
                {s.provider} {s.externalSubscriptionId}
              </td>
              <td>
                <Status value={s.status} />
              </td>
              <td>
                {when(s.currentPeriodStart)} – {when(s.currentPeriodEnd)}
              </td>
              <td>{when(s.updatedAt)}</td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}

function ConnectionDetail({
  client,
  connection,
  plans,
  onChange,
}: {
  client: Client;
  connection: BillingConnectionDto;
  plans: WorkspacePlanDto[];
  onChange: () => void;
}) {
  const action = useAction();
  const [credential, setCredential] = useState('');
  const [secret, setSecret] = useState('');
  const [runs, setRuns] = useState<{ at: string; accepted: boolean; operationId?: string | undefined }[]>([]);
  const id = connection.id;
  const reconcile = async () => {
    const res = await action.run('Reconciling with the provider (this can take a while)…', () =>
      reconcileBillingConnection({ client, path: { connectionId: id } }),
    );
    if (res) setRuns([{ at: new Date().toISOString(), accepted: res.data.accepted, operationId: res.data.operationId }, ...runs]);
  };
  return (
    <div class="card">
      <div class="row">
        <button
          type="button"
          onClick={() =>
            void action
              .run('Verifying the credential…', () => verifyBillingConnection({ client, path: { connectionId: id } }))
              .then(onChange)
          }
        >
          Verify credential
        </button>
        <button type="button" onClick={() => void reconcile()}>
          Reconcile now
        </button>
        {connection.status === 'ACTIVE' ? (
          <button
            type="button"
            class="danger"
            onClick={() =>
              window.confirm(`Disable ${connection.name}?`) &&
              void action.run('Disabling…', () => disableBillingConnection({ client, path: { connectionId: id } })).then(onChange)
            }
          >
            Disable
          </button>
        ) : null}
      </div>
      <div class="grid">
        <Form
          title="Provider credential"
          submit="Save credential"
          disabled={!!action.working}
          onSubmit={() =>
            void action
              .run('Saving…', () => configureBillingProviderCredential({ client, path: { connectionId: id }, body: { credential } }))
              .then(onChange)
          }
        >
          <Field label="Credential" hint={connection.credentialPreview ? `Now: ${connection.credentialPreview}` : 'None set'}>
            <input type="password" autoComplete="off" required value={credential} onInput={(e) => setCredential(valueOf(e))} />
          </Field>
        </Form>
        <Form
          title="Webhook signing secret"
          submit="Save secret"
          disabled={!!action.working}
          onSubmit={() =>
            void action
              .run('Saving…', () => configureBillingWebhookSecret({ client, path: { connectionId: id }, body: { webhookSecret: secret } }))
              .then(onChange)
          }
        >
          <Field label="Secret" hint={connection.webhookSecretConfigured ? 'A secret is set: saving rotates it' : 'None set'}>
            <input type="password" autoComplete="off" required value={secret} onInput={(e) => setSecret(valueOf(e))} />
          </Field>
        </Form>
      </div>
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
      <h4>Reconciliation runs (this session)</h4>
      {runs.length === 0 ? (
        <Empty>No run yet: "Reconcile now" asks the provider for every subscription and brings the projections in line.</Empty>
      ) : (
        <ul>
          {runs.map((r) => (
            <li key={r.at}>
              {when(r.at)}: {r.accepted ? 'accepted' : 'refused'} {r.operationId ? <code>{r.operationId}</code> : null}
            </li>
          ))}
        </ul>
      )}
      <Mappings client={client} connection={connection} plans={plans} />
      <Inbox client={client} connection={connection} />
    </div>
  );
}

export function BillingPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const list = usePaged((cursor) => listBillingConnections({ client, path: { workspaceId }, query: { cursor, limit: 20 } }), [workspaceId]);
  const [plans, setPlans] = useState<WorkspacePlanDto[]>([]);
  useEffect(() => {
    listPlans({ client, path: { workspaceId }, query: { limit: 100, status: 'ACTIVE' } }).then(
      (p) => setPlans(p.data),
      () => setPlans([]),
    );
  }, [workspaceId]);
  const action = useAction();
  const [form, setForm] = useState({
    name: '',
    provider: 'STRIPE' as 'STRIPE' | 'PADDLE',
    kind: 'HOSTED' as 'HOSTED' | 'APP_SYNC',
    mode: 'TEST' as 'TEST' | 'LIVE',
  });
  const [open, setOpen] = useState<string | undefined>();
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: valueOf(e) });
  const create = async () => {
    const res = await action.run('Creating the billing connection…', () =>
      createBillingConnection({ client, path: { workspaceId }, body: form, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      setOpen(res.data.id);
      setForm({ ...form, name: '' });
      list.reload();
    }
  };
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Billing</h1>
      <p class="lead">
        Stripe or Paddle subscriptions that give users access to plans: connections, product mappings, the webhook inbox and reconciliation.
      </p>
      <Form title="Connect a billing provider" submit="Create billing connection" onSubmit={create} disabled={!!action.working}>
        <div class="grid">
          <Field label="Name">
            <input name="billingName" required value={form.name} onInput={set('name')} />
          </Field>
          <Field label="Provider">
            <select value={form.provider} onChange={set('provider')}>
              <option value="STRIPE">Stripe</option>
              <option value="PADDLE">Paddle</option>
            </select>
          </Field>
          <Field label="Kind">
            <select value={form.kind} onChange={set('kind')}>
              <option value="HOSTED">Hosted checkout</option>
              <option value="APP_SYNC">Synced by your app</option>
            </select>
          </Field>
          <Field label="Mode">
            <select value={form.mode} onChange={set('mode')}>
              <option value="TEST">Test</option>
              <option value="LIVE">Live</option>
            </select>
          </Field>
        </div>
      </Form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {list.items?.length === 0 ? (
        <Empty>
          No billing connection. Connect Stripe or Paddle above if your users pay through one; otherwise provision them directly.
        </Empty>
      ) : (
        <ListTable caption="Billing connections" columns={['Connection', 'Status', 'Credential', 'Webhook secret', 'Details']}>
          {list.items?.map((c) => (
            <>
              <tr key={c.id}>
                <td>
                  {c.name}
                  <div class="id">
                    {c.provider} · {c.kind} · {c.mode}
                  </div>
                </td>
                <td>
                  <Status value={c.status} />
                </td>
                <td>
                  <Status value={c.credentialVerificationStatus} />
                </td>
                <td>{c.webhookSecretConfigured ? 'set' : 'not set'}</td>
                <td>
                  <button type="button" aria-expanded={open === c.id} onClick={() => setOpen(open === c.id ? undefined : c.id)}>
                    {open === c.id ? 'Close' : `Manage ${c.name}`}
                  </button>
                </td>
              </tr>
              {open === c.id ? (
                <tr key={`${c.id}-detail`}>
                  <td colSpan={5}>
                    <ConnectionDetail client={client} connection={c} plans={plans} onChange={list.reload} />
                  </td>
                </tr>
              ) : null}
            </>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
      <Subscriptions client={client} workspaceId={workspaceId} />
    </section>
  );
}
