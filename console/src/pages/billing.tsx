import { useState } from 'preact/hooks';
import {
  configureBillingProviderCredential,
  configureBillingWebhookSecret,
  createBillingConnection,
  createBillingProductMapping,
  deleteBillingProductMapping,
  disableBillingConnection,
  idempotent,
  listBillingConnections,
  listBillingProductMappings,
  listBillingWebhookEvents,
  listExternalSubscriptions,
  reconcileBillingConnection,
  replayBillingWebhookEvent,
  verifyBillingConnection,
  type BillingConnectionDto,
  type Client,
  type WorkspacePlanDto,
  type WorkspaceUserDto,
} from '../api.js';
import { ActionButton, ExpandButton, useOpenRow } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { SecretForm } from '../components/secret-form.js';
import { UserPicker } from '../components/user-picker.js';
import { when } from '../format.js';
import { onlySet, useAction, useFields, usePaged, valueOf } from '../hooks.js';
import { namesOf, usePlans } from '../lookups.js';
import { ActionNotes, Empty, ErrorNote, Form, Input, Page, Select, Status, statusChoices, type PageProps } from '../ui.js';

type EventStatus = 'RECEIVED' | 'PROCESSING' | 'PROCESSED' | 'IGNORED' | 'FAILED';

const NEW_MAPPING = { externalProductId: '', externalPriceId: '', planId: '' };

function Mappings({ client, connection, plans }: { client: Client; connection: BillingConnectionDto; plans: WorkspacePlanDto[] }) {
  const connectionId = connection.id;
  const list = usePaged((page) => listBillingProductMappings({ client, path: { connectionId }, query: page }), [connectionId]);
  const action = useAction();
  const { values: form, bind, reset, set } = useFields(NEW_MAPPING);
  const create = async () => {
    const planId = form.planId || plans[0]?.id;
    if (!planId) return;
    const body = {
      externalProductId: form.externalProductId,
      planId,
      ...(form.externalPriceId ? { externalPriceId: form.externalPriceId } : {}),
    };
    if (await action.run('Mapping…', () => createBillingProductMapping({ client, path: { connectionId }, body, headers: idempotent() }))) {
      reset();
      list.reload();
    }
  };
  return (
    <div>
      <h4>Product mappings</h4>
      <Form
        operation="createBillingProductMapping"
        title="Map a product to a plan"
        submit="Add mapping"
        onSubmit={create}
        disabled={!!action.working || plans.length === 0}
      >
        <div class="grid">
          <Input label="External product id" required {...bind('externalProductId')} />
          <Input label="External price id (optional)" {...bind('externalPriceId')} />
          <Select label="Plan" choices={namesOf(plans)} value={form.planId || plans[0]?.id} onChange={set('planId')} />
        </div>
      </Form>
      <ActionNotes action={action} problem={list.problem} />
      <PagedTable
        list={list}
        columns={['Product', 'Price', 'Plan', 'Status', 'Actions']}
        empty="No mapping: map the provider's product to a plan so its subscriptions give access to it."
        row={(m) => (
          <tr>
            <td>{m.externalProductId}</td>
            <td>{m.externalPriceId ?? '—'}</td>
            <td>{plans.find((p) => p.id === m.planId)?.name ?? m.planId}</td>
            <td>
              <Status value={m.status} />
            </td>
            <td class="actions">
              {m.status === 'ACTIVE' ? (
                <ActionButton
                  operation="deleteBillingProductMapping"
                  action={action}
                  label="Disabling…"
                  call={() => deleteBillingProductMapping({ client, path: { mappingId: m.id } })}
                  onDone={list.reload}
                >
                  Disable
                </ActionButton>
              ) : null}
            </td>
          </tr>
        )}
      />
    </div>
  );
}

function Inbox({ client, connection }: { client: Client; connection: BillingConnectionDto }) {
  const [status, setStatus] = useState<EventStatus | ''>('');
  const connectionId = connection.id;
  const list = usePaged(
    (page) => listBillingWebhookEvents({ client, path: { connectionId }, query: { ...page, ...onlySet({ status }) } }),
    [connectionId, status],
  );
  const action = useAction();
  return (
    <div>
      <h4>Webhook inbox</h4>
      <p class="id">Webhook URL for the provider: {connection.webhookUrl}</p>
      <Select
        label="Status"
        choices={statusChoices(['RECEIVED', 'PROCESSING', 'PROCESSED', 'IGNORED', 'FAILED'], 'Any')}
        value={status}
        onChange={(e) => setStatus(valueOf(e) as EventStatus | '')}
      />
      <ActionNotes action={action} problem={list.problem} />
      <PagedTable
        list={list}
        columns={['Type', 'Status', 'Attempts', 'Received', 'Last error', 'Actions']}
        empty={`No webhook event ${status ? `with status ${status.toLowerCase()}` : 'received yet'}. Point the provider's webhook at the URL above, with the signing secret set here.`}
        row={(ev) => (
          <tr>
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
                <ActionButton
                  operation="replayBillingWebhookEvent"
                  action={action}
                  label="Replaying the event…"
                  call={() => replayBillingWebhookEvent({ client, path: { eventId: ev.id } })}
                  onDone={list.reload}
                >
                  Replay
                </ActionButton>
              ) : null}
            </td>
          </tr>
        )}
      />
    </div>
  );
}

function Subscriptions({ client, workspaceId }: { client: Client; workspaceId: string }) {
  const [user, setUser] = useState<WorkspaceUserDto | undefined>();
  const accessId = user?.access.id ?? '';
  const list = usePaged(
    (page) =>
      accessId
        ? listExternalSubscriptions({ client, path: { accessId }, query: page })
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
      ) : (
        <PagedTable
          list={list}
          columns={['Subscription', 'Status', 'Period', 'Updated']}
          empty="No subscription for this user: one appears when the provider's webhook or a reconciliation reports it."
          row={(s) => (
            <tr>
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
          )}
        />
      )}
    </section>
  );
}

function ConnectionDetail(props: { client: Client; connection: BillingConnectionDto; plans: WorkspacePlanDto[]; onChange: () => void }) {
  const { client, connection, plans, onChange } = props;
  const action = useAction();
  const [runs, setRuns] = useState<{ at: string; accepted: boolean; operationId?: string | undefined }[]>([]);
  const path = { connectionId: connection.id };
  return (
    <div class="card">
      <div class="row">
        <ActionButton
          operation="verifyBillingConnection"
          action={action}
          label="Verifying the credential…"
          call={() => verifyBillingConnection({ client, path })}
          onDone={onChange}
        >
          Verify credential
        </ActionButton>
        <ActionButton
          operation="reconcileBillingConnection"
          action={action}
          label="Reconciling with the provider (this can take a while)…"
          call={() => reconcileBillingConnection({ client, path })}
          onDone={(res) =>
            setRuns([{ at: new Date().toISOString(), accepted: res.data.accepted, operationId: res.data.operationId }, ...runs])
          }
        >
          Reconcile now
        </ActionButton>
        {connection.status === 'ACTIVE' ? (
          <ActionButton
            operation="disableBillingConnection"
            action={action}
            danger
            confirm={`Disable ${connection.name}?`}
            label="Disabling…"
            call={() => disableBillingConnection({ client, path })}
            onDone={onChange}
          >
            Disable
          </ActionButton>
        ) : null}
      </div>
      <div class="grid">
        <SecretForm
          operation="configureBillingProviderCredential"
          action={action}
          title="Provider credential"
          submit="Save credential"
          label="Credential"
          hint={connection.credentialPreview ? `Now: ${connection.credentialPreview}` : 'None set'}
          working="Saving…"
          save={(credential) => configureBillingProviderCredential({ client, path, body: { credential } })}
          onDone={onChange}
        />
        <SecretForm
          operation="configureBillingWebhookSecret"
          action={action}
          title="Webhook signing secret"
          submit="Save secret"
          label="Secret"
          hint={connection.webhookSecretConfigured ? 'A secret is set: saving rotates it' : 'None set'}
          working="Saving…"
          save={(webhookSecret) => configureBillingWebhookSecret({ client, path, body: { webhookSecret } })}
          onDone={onChange}
        />
      </div>
      <ActionNotes action={action} />
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

const NEW_CONNECTION = {
  name: '',
  provider: 'STRIPE' as 'STRIPE' | 'PADDLE',
  kind: 'HOSTED' as 'HOSTED' | 'APP_SYNC',
  mode: 'TEST' as 'TEST' | 'LIVE',
};

export function BillingPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const list = usePaged((page) => listBillingConnections({ client, path: { workspaceId }, query: page }), [workspaceId]);
  const plans = usePlans(client, workspaceId, 'ACTIVE') ?? [];
  const action = useAction();
  const { values: form, bind, bindChange, put } = useFields(NEW_CONNECTION);
  const rows = useOpenRow();
  const create = async () => {
    const res = await action.run('Creating the billing connection…', () =>
      createBillingConnection({ client, path: { workspaceId }, body: form, headers: idempotent() }),
    );
    if (res) {
      rows.set(res.data.id);
      put({ name: '' });
      list.reload();
    }
  };
  return (
    <Page
      title="Billing"
      lead="Stripe or Paddle subscriptions that give users access to plans: connections, product mappings, the webhook inbox and reconciliation."
    >
      <Form
        operation="createBillingConnection"
        title="Connect a billing provider"
        submit="Create billing connection"
        onSubmit={create}
        disabled={!!action.working}
      >
        <div class="grid">
          <Input label="Name" name="billingName" required {...bind('name')} />
          <Select label="Provider" choices={{ STRIPE: 'Stripe', PADDLE: 'Paddle' }} {...bindChange('provider')} />
          <Select label="Kind" choices={{ HOSTED: 'Hosted checkout', APP_SYNC: 'Synced by your app' }} {...bindChange('kind')} />
          <Select label="Mode" choices={{ TEST: 'Test', LIVE: 'Live' }} {...bindChange('mode')} />
        </div>
      </Form>
      <ActionNotes action={action} problem={list.problem} />
      <PagedTable
        list={list}
        caption="Billing connections"
        columns={['Connection', 'Status', 'Credential', 'Webhook secret', 'Details']}
        empty="No billing connection. Connect Stripe or Paddle above if your users pay through one; otherwise provision them directly."
        row={(c) => (
          <tr>
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
              <ExpandButton rows={rows} id={c.id} show={`Manage ${c.name}`} hide="Close" />
            </td>
          </tr>
        )}
        detail={(c) => (rows.is(c.id) ? <ConnectionDetail client={client} connection={c} plans={plans} onChange={list.reload} /> : null)}
      />
      <Subscriptions client={client} workspaceId={workspaceId} />
    </Page>
  );
}
