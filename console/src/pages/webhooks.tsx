import { useState } from 'preact/hooks';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  disableWebhookEndpoint,
  idempotent,
  listWebhookEndpoints,
  rotateWebhookEndpointSecret,
  sendTestWebhookEvent,
  updateWebhookEndpoint,
  type Client,
  type WebhookEndpointDto,
  type WebhookEventType,
} from '../api.js';
import { ActionButton, ExpandButton, useOpenRow } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { when } from '../format.js';
import { useAction, usePaged, valueOf, type Action } from '../hooks.js';
import { ActionNotes, ErrorNote, Form, Input, Notice, Page, ShownOnce, Status, type PageProps } from '../ui.js';
import { Messages } from './webhook-messages.js';

/** The event catalogue (docs/events.md), each type with what it reports; a type the contract adds fails to compile here until it is described. */
const CATALOGUE: Record<WebhookEventType, string> = {
  'quota.threshold_crossed': "an access's consumed units reached a threshold of its granted units",
  'access.status_changed': "an access's status changed",
  'inference_key.expiring': 'a key entered its last days before it expires',
  'inference_key.revoked': 'a key was revoked',
  'workspace.budget_crossed': "the workspace's provider cost reached its soft or hard budget",
  'provider_connection.unhealthy': "a connection's verification failed, or a route's breaker opened on it",
  'provider_connection.recovered': 'a verification passed again, or a breaker closed',
  'billing.subscription_changed': 'an external subscription was first seen, or its status or plan changed',
  'webhook_endpoint.disabled': 'Nexus disabled an endpoint (a 410, or failing too long); sent to the others',
  'webhook.test': 'a test event, to one endpoint',
  'batch.completed': 'a batch made through the gateway was settled: its requests that ran charged, the rest released',
};
const EVENT_TYPES = Object.keys(CATALOGUE) as WebhookEventType[];

interface EndpointForm {
  url: string;
  description: string;
  /** The types ticked; none: every type (null to the API). */
  types: WebhookEventType[];
}

/** What an endpoint is: its URL, its description and the event types it gets (none ticked: every type, also those added later). */
function EndpointFields({ form, onChange, urlHint }: { form: EndpointForm; onChange: (form: EndpointForm) => void; urlHint?: string }) {
  const { url, description, types } = form;
  return (
    <>
      <div class="grid">
        <Input
          label="URL"
          hint={urlHint}
          name="url"
          type="url"
          required
          value={url}
          onInput={(e) => onChange({ ...form, url: valueOf(e) })}
        />
        <Input label="Description" name="description" value={description} onInput={(e) => onChange({ ...form, description: valueOf(e) })} />
      </div>
      <fieldset>
        <legend>Event types (none ticked: every type, also those added later)</legend>
        <div class="grid">
          {EVENT_TYPES.map((type) => (
            <label class="check" key={type}>
              <input
                type="checkbox"
                name="eventTypes"
                value={type}
                checked={types.includes(type)}
                onChange={(e) => onChange({ ...form, types: e.currentTarget.checked ? [...types, type] : types.filter((t) => t !== type) })}
              />
              <span>
                <code>{type}</code> <small>{CATALOGUE[type]}</small>
              </span>
            </label>
          ))}
        </div>
      </fieldset>
    </>
  );
}

const typesOf = (e: WebhookEndpointDto) => (e.eventTypes === null ? 'every type' : e.eventTypes.join(', '));

/** An endpoint's address, description and event types, changed in place. */
function EditEndpoint({ client, endpoint, onDone }: { client: Client; endpoint: WebhookEndpointDto; onDone: () => void }) {
  const [form, setForm] = useState<EndpointForm>({
    url: endpoint.url,
    description: endpoint.description,
    types: endpoint.eventTypes ?? [],
  });
  const action = useAction();
  const save = async () => {
    const body = { url: form.url, description: form.description, eventTypes: form.types.length ? form.types : null };
    if (await action.run('Saving…', () => updateWebhookEndpoint({ client, path: { webhookEndpointId: endpoint.id }, body }))) onDone();
  };
  return (
    <>
      <Form
        operation="updateWebhookEndpoint"
        title={`Edit ${endpoint.url}`}
        submit="Save endpoint"
        onSubmit={save}
        disabled={!!action.working}
      >
        <EndpointFields form={form} onChange={setForm} />
      </Form>
      <ErrorNote problem={action.problem} />
    </>
  );
}

/** An endpoint's buttons: its messages, a test event, editing it, a new secret, disabling or enabling it, deleting it. */
function EndpointActions(props: {
  client: Client;
  endpoint: WebhookEndpointDto;
  action: Action;
  /** The panel open under an endpoint: `<id>/messages` or `<id>/edit`. */
  panels: ReturnType<typeof useOpenRow>;
  onNote: (note: string | undefined) => void;
  onTested: () => void;
  onSecret: (secret: { label: string; value: string }) => void;
  onChange: () => void;
}) {
  const { client, endpoint: e, action, panels, onChange } = props;
  const path = { webhookEndpointId: e.id };
  return (
    <>
      <ExpandButton rows={panels} id={`${e.id}/messages`} show="Messages" hide="Messages" />
      {e.status === 'ACTIVE' ? (
        <ActionButton
          operation="sendTestWebhookEvent"
          action={action}
          disabled={!!action.working}
          label="Sending a test event…"
          call={() => {
            props.onNote(undefined);
            return sendTestWebhookEvent({ client, path, headers: idempotent() });
          }}
          onDone={(res) => {
            props.onNote(`Test event ${res.data.id} queued for ${e.url}.`);
            panels.set(`${e.id}/messages`);
            props.onTested();
          }}
        >
          Send test event
        </ActionButton>
      ) : null}
      <ExpandButton rows={panels} id={`${e.id}/edit`} show="Edit" hide="Edit" />
      <ActionButton
        operation="rotateWebhookEndpointSecret"
        action={action}
        confirm={`Rotate the signing secret of ${e.url}? The old secret still verifies for a while; then only the new one does.`}
        label="Rotating the secret…"
        call={() => rotateWebhookEndpointSecret({ client, path, headers: idempotent() })}
        onDone={(res) => {
          const until = res.data.previousSecretValidUntil;
          const old = until ? ` (the old one verifies until ${when(until)})` : '';
          props.onSecret({ label: `The new signing secret of ${e.url}${old}.`, value: res.data.secret });
          onChange();
        }}
      >
        Rotate secret
      </ActionButton>
      {e.status === 'ACTIVE' ? (
        <ActionButton
          operation="disableWebhookEndpoint"
          action={action}
          confirm={`Disable ${e.url}? Nothing is sent to it until it is enabled again; its pending messages fail.`}
          label="Disabling…"
          call={() => disableWebhookEndpoint({ client, path, headers: idempotent() })}
          onDone={onChange}
        >
          Disable
        </ActionButton>
      ) : (
        <ActionButton
          operation="updateWebhookEndpoint"
          action={action}
          label="Enabling…"
          call={() => updateWebhookEndpoint({ client, path, body: { status: 'ACTIVE' } })}
          onDone={onChange}
        >
          Enable
        </ActionButton>
      )}
      <ActionButton
        operation="deleteWebhookEndpoint"
        action={action}
        danger
        confirm={`Delete ${e.url}? It receives nothing more, and it cannot be undone.`}
        label="Deleting…"
        call={() => deleteWebhookEndpoint({ client, path })}
        onDone={() => {
          if (panels.open?.startsWith(`${e.id}/`)) panels.set(undefined);
          onChange();
        }}
      >
        Delete
      </ActionButton>
    </>
  );
}

const NEW_ENDPOINT: EndpointForm = { url: '', description: '', types: [] };

export function WebhooksPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const list = usePaged((page) => listWebhookEndpoints({ client, path: { workspaceId }, query: page }), [workspaceId]);
  const action = useAction();
  const [form, setForm] = useState(NEW_ENDPOINT);
  const [secret, setSecret] = useState<{ label: string; value: string } | undefined>();
  /** The panel open under an endpoint: `<id>/messages` or `<id>/edit`. */
  const panels = useOpenRow();
  const [sent, setSent] = useState(0);
  const [note, setNote] = useState<string | undefined>();

  const create = async () => {
    const body = {
      url: form.url.trim(),
      ...(form.description.trim() ? { description: form.description.trim() } : {}),
      ...(form.types.length ? { eventTypes: form.types } : {}),
    };
    const res = await action.run('Creating the endpoint…', () =>
      createWebhookEndpoint({ client, path: { workspaceId }, body, headers: idempotent() }),
    );
    if (res) {
      setSecret({ label: `The signing secret of ${res.data.url}.`, value: res.data.secret });
      setForm(NEW_ENDPOINT);
      list.reload();
    }
  };
  return (
    <Page
      title="Webhooks"
      lead={
        <>
          Nexus signs each event (Standard Webhooks: <code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>
          ) and retries a delivery that fails. Verify it with the endpoint's secret, shown once when the endpoint is created or its secret
          rotated.
        </>
      }
    >
      <Form
        fold="New webhook endpoint"
        operation="createWebhookEndpoint"
        title="Add a webhook endpoint"
        submit="Add endpoint"
        onSubmit={create}
        disabled={!!action.working}
      >
        <EndpointFields form={form} onChange={setForm} urlHint="https:// (http:// only where private upstreams are allowed)" />
      </Form>
      {secret ? <ShownOnce label={secret.label} secret={secret.value} onDismiss={() => setSecret(undefined)} /> : null}
      <ActionNotes action={action} problem={list.problem} />
      <Notice text={note} />
      <PagedTable
        list={list}
        caption="Webhook endpoints"
        columns={['Endpoint', 'Events', 'Status', 'Created', 'Actions']}
        empty="No webhook endpoint yet. Add one above to receive quota, key, budget and connection events."
        row={(e) => (
          <tr>
            <td>
              <code>{e.url}</code>
              {e.description ? <div>{e.description}</div> : null}
              <div class="id">{e.id}</div>
            </td>
            <td>{typesOf(e)}</td>
            <td>
              <Status value={e.status} />
              {e.disabledReason ? <div class="id">{e.disabledReason}</div> : null}
              {e.failingSince ? <div class="id">failing since {when(e.failingSince)}</div> : null}
            </td>
            <td>{when(e.createdAt)}</td>
            <td class="actions">
              <EndpointActions
                client={client}
                endpoint={e}
                action={action}
                panels={panels}
                onTested={() => setSent((v) => v + 1)}
                onNote={setNote}
                onSecret={setSecret}
                onChange={list.reload}
              />
            </td>
          </tr>
        )}
        detail={(e) =>
          panels.is(`${e.id}/messages`) ? (
            <Messages client={client} endpoint={e} version={sent} />
          ) : panels.is(`${e.id}/edit`) ? (
            <EditEndpoint
              client={client}
              endpoint={e}
              onDone={() => {
                panels.set(undefined);
                list.reload();
              }}
            />
          ) : null
        }
      />
    </Page>
  );
}
