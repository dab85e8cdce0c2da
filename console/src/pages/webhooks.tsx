import { useState } from 'preact/hooks';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  disableWebhookEndpoint,
  idempotencyKey,
  listWebhookEndpoints,
  listWebhookMessages,
  replayFailedWebhookMessages,
  replayWebhookMessage,
  rotateWebhookEndpointSecret,
  sendTestWebhookEvent,
  updateWebhookEndpoint,
  type Client,
  type WebhookEndpointDto,
  type WebhookEventType,
  type WebhookMessageDto,
  type WebhookMessageStatus,
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
  ShownOnce,
  Status,
  toInstant,
  useAction,
  usePaged,
  valueOf,
  when,
  Working,
} from '../ui.js';

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
};
const EVENT_TYPES = Object.keys(CATALOGUE) as WebhookEventType[];

/** The event-type filter: the types ticked, or none ticked for every type (null). */
function EventTypes({ chosen, onChange }: { chosen: WebhookEventType[]; onChange: (types: WebhookEventType[]) => void }) {
  return (
    <fieldset>
      <legend>Event types (none ticked: every type, also those added later)</legend>
      <div class="grid">
        {EVENT_TYPES.map((type) => (
          <label class="check" key={type}>
            <input
              type="checkbox"
              name="eventTypes"
              value={type}
              checked={chosen.includes(type)}
              onChange={(e) => onChange(e.currentTarget.checked ? [...chosen, type] : chosen.filter((t) => t !== type))}
            />
            <span>
              <code>{type}</code> <small>{CATALOGUE[type]}</small>
            </span>
          </label>
        ))}
      </div>
    </fieldset>
  );
}

const typesOf = (e: WebhookEndpointDto) => (e.eventTypes === null ? 'every type' : e.eventTypes.join(', '));

/** A message's attempts, newest last: when, the outcome, the receiver's status and answer, or why none came. */
function Attempts({ message }: { message: WebhookMessageDto }) {
  const payload = (
    <details>
      <summary>The event as sent</summary>
      <pre>
        <code>{JSON.stringify(message.payload, null, 2)}</code>
      </pre>
    </details>
  );
  if (message.attempts.length === 0)
    return (
      <>
        <Empty>No attempt yet: the message is queued.</Empty>
        {payload}
      </>
    );
  return (
    <>
      <ListTable caption={`Attempts of ${message.id}`} columns={['When', 'Outcome', 'Status', 'Latency', 'Answer or error']}>
        {message.attempts.map((a) => (
          <tr key={a.id}>
            <td>{when(a.createdAt)}</td>
            <td>
              <Status value={a.outcome} />
            </td>
            <td>{a.responseStatus ?? '—'}</td>
            <td class="num">{a.latencyMs} ms</td>
            <td>
              <code>{a.error ?? a.responseBody ?? ''}</code>
            </td>
          </tr>
        ))}
      </ListTable>
      {payload}
    </>
  );
}

/** An endpoint's messages (its deliveries), filtered by status, each with its attempts; replay one, or every failed one since a time. */
function Messages({ client, endpoint, version }: { client: Client; endpoint: WebhookEndpointDto; version: number }) {
  const [status, setStatus] = useState<WebhookMessageStatus | ''>('');
  const [open, setOpen] = useState<string | undefined>();
  const [since, setSince] = useState(() => localNow(-86_400_000));
  const [done, setDone] = useState<string | undefined>();
  const action = useAction();
  const list = usePaged(
    (cursor) =>
      listWebhookMessages({
        client,
        path: { webhookEndpointId: endpoint.id },
        query: { cursor, limit: 20, ...(status ? { status } : {}) },
      }),
    [endpoint.id, status, version],
  );
  const replay = async (m: WebhookMessageDto) => {
    setDone(undefined);
    const res = await action.run('Replaying…', () =>
      replayWebhookMessage({
        client,
        path: { webhookEndpointId: endpoint.id, messageId: m.id },
        headers: { 'Idempotency-Key': idempotencyKey() },
      }),
    );
    if (res) {
      setDone(`Message ${m.id} is queued again.`);
      list.reload();
    }
  };
  const replayFailed = async () => {
    setDone(undefined);
    const res = await action.run('Replaying the failed messages…', () =>
      replayFailedWebhookMessages({
        client,
        path: { webhookEndpointId: endpoint.id },
        body: { since: toInstant(since) },
        headers: { 'Idempotency-Key': idempotencyKey() },
      }),
    );
    if (res) {
      setDone(`${res.data.replayed} failed message${res.data.replayed === 1 ? '' : 's'} queued again.`);
      list.reload();
    }
  };
  return (
    <section class="bindings" aria-label={`Messages to ${endpoint.url}`}>
      <h3>Messages to {endpoint.url}</h3>
      <div class="toolbar">
        <Field label="Status">
          <select name="messageStatus" value={status} onChange={(e) => setStatus(valueOf(e) as WebhookMessageStatus | '')}>
            <option value="">Any</option>
            <option value="PENDING">Pending</option>
            <option value="DELIVERED">Delivered</option>
            <option value="FAILED">Failed</option>
          </select>
        </Field>
        <button type="button" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      <Form title={`Replay failed messages to ${endpoint.url}`} submit="Replay failed" onSubmit={replayFailed} disabled={!!action.working}>
        <Field label="Failed since (your local time)">
          <input name="since" type="datetime-local" required value={since} onInput={(e) => setSince(valueOf(e))} />
        </Field>
      </Form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {done ? <p role="status">{done}</p> : null}
      {list.items?.length === 0 ? (
        <Empty>{status ? `No ${status.toLowerCase()} message.` : 'No message yet. Send a test event to see one.'}</Empty>
      ) : (
        <ListTable caption={`Messages to ${endpoint.url}`} columns={['Created', 'Event', 'Status', 'Attempts', 'Last attempt', 'Actions']}>
          {list.items?.map((m) => (
            <>
              <tr key={m.id}>
                <td>
                  {when(m.createdAt)}
                  <div class="id">{m.id}</div>
                </td>
                <td>
                  <code>{m.eventType}</code>
                </td>
                <td>
                  <Status value={m.status} />
                  {m.nextAttemptAt ? <div class="id">next {when(m.nextAttemptAt)}</div> : null}
                </td>
                <td class="num">{m.attemptCount}</td>
                <td>{when(m.lastAttemptAt)}</td>
                <td class="actions">
                  <button type="button" aria-expanded={open === m.id} onClick={() => setOpen(open === m.id ? undefined : m.id)}>
                    {open === m.id ? 'Hide attempts' : `Attempts (${m.attempts.length})`}
                  </button>
                  <button type="button" onClick={() => void replay(m)} disabled={!!action.working}>
                    Replay
                  </button>
                </td>
              </tr>
              {open === m.id ? (
                <tr key={`${m.id}-attempts`}>
                  <td colSpan={6}>
                    <Attempts message={m} />
                  </td>
                </tr>
              ) : null}
            </>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}

/** An endpoint's address, description and event types, changed in place. */
function EditEndpoint({ client, endpoint, onDone }: { client: Client; endpoint: WebhookEndpointDto; onDone: () => void }) {
  const [url, setUrl] = useState(endpoint.url);
  const [description, setDescription] = useState(endpoint.description);
  const [types, setTypes] = useState<WebhookEventType[]>(endpoint.eventTypes ?? []);
  const action = useAction();
  const save = async () => {
    const body = { url, description, eventTypes: types.length ? types : null };
    if (await action.run('Saving…', () => updateWebhookEndpoint({ client, path: { webhookEndpointId: endpoint.id }, body }))) onDone();
  };
  return (
    <>
      <Form title={`Edit ${endpoint.url}`} submit="Save endpoint" onSubmit={save} disabled={!!action.working}>
        <div class="grid">
          <Field label="URL">
            <input name="url" type="url" required value={url} onInput={(e) => setUrl(valueOf(e))} />
          </Field>
          <Field label="Description">
            <input name="description" value={description} onInput={(e) => setDescription(valueOf(e))} />
          </Field>
        </div>
        <EventTypes chosen={types} onChange={setTypes} />
      </Form>
      <ErrorNote problem={action.problem} />
    </>
  );
}

export function WebhooksPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const list = usePaged((cursor) => listWebhookEndpoints({ client, path: { workspaceId }, query: { cursor, limit: 20 } }), [workspaceId]);
  const action = useAction();
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [types, setTypes] = useState<WebhookEventType[]>([]);
  const [secret, setSecret] = useState<{ label: string; value: string } | undefined>();
  const [open, setOpen] = useState<{ id: string; panel: 'messages' | 'edit' } | undefined>();
  const [sent, setSent] = useState(0);
  const [note, setNote] = useState<string | undefined>();

  const create = async () => {
    const body = {
      url: url.trim(),
      ...(description.trim() ? { description: description.trim() } : {}),
      ...(types.length ? { eventTypes: types } : {}),
    };
    const res = await action.run('Creating the endpoint…', () =>
      createWebhookEndpoint({ client, path: { workspaceId }, body, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      setSecret({ label: `The signing secret of ${res.data.url}.`, value: res.data.secret });
      setUrl('');
      setDescription('');
      setTypes([]);
      list.reload();
    }
  };
  const test = async (e: WebhookEndpointDto) => {
    setNote(undefined);
    const res = await action.run('Sending a test event…', () =>
      sendTestWebhookEvent({ client, path: { webhookEndpointId: e.id }, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      setNote(`Test event ${res.data.id} queued for ${e.url}.`);
      setOpen({ id: e.id, panel: 'messages' });
      setSent((v) => v + 1);
    }
  };
  const rotate = async (e: WebhookEndpointDto) => {
    if (!window.confirm(`Rotate the signing secret of ${e.url}? The old secret still verifies for a while; then only the new one does.`))
      return;
    const res = await action.run('Rotating the secret…', () =>
      rotateWebhookEndpointSecret({ client, path: { webhookEndpointId: e.id }, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      const until = res.data.previousSecretValidUntil;
      setSecret({
        label: `The new signing secret of ${e.url}${until ? ` (the old one verifies until ${when(until)})` : ''}.`,
        value: res.data.secret,
      });
      list.reload();
    }
  };
  const disable = async (e: WebhookEndpointDto) => {
    if (!window.confirm(`Disable ${e.url}? Nothing is sent to it until it is enabled again; its pending messages fail.`)) return;
    if (
      await action.run('Disabling…', () =>
        disableWebhookEndpoint({ client, path: { webhookEndpointId: e.id }, headers: { 'Idempotency-Key': idempotencyKey() } }),
      )
    )
      list.reload();
  };
  const enable = async (e: WebhookEndpointDto) => {
    if (
      await action.run('Enabling…', () => updateWebhookEndpoint({ client, path: { webhookEndpointId: e.id }, body: { status: 'ACTIVE' } }))
    )
      list.reload();
  };
  const remove = async (e: WebhookEndpointDto) => {
    if (!window.confirm(`Delete ${e.url}? It receives nothing more, and it cannot be undone.`)) return;
    if (await action.run('Deleting…', () => deleteWebhookEndpoint({ client, path: { webhookEndpointId: e.id } }))) {
      if (open?.id === e.id) setOpen(undefined);
      list.reload();
    }
  };
  const toggle = (id: string, panel: 'messages' | 'edit') => setOpen(open?.id === id && open.panel === panel ? undefined : { id, panel });

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Webhooks</h1>
      <p class="lead">
        Nexus signs each event (Standard Webhooks: <code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>)
        and retries a delivery that fails. Verify it with the endpoint's secret, shown once when the endpoint is created or its secret
        rotated.
      </p>
      <Form title="Add a webhook endpoint" submit="Add endpoint" onSubmit={create} disabled={!!action.working}>
        <div class="grid">
          <Field label="URL" hint="https:// (http:// only where private upstreams are allowed)">
            <input name="url" type="url" required value={url} onInput={(e) => setUrl(valueOf(e))} />
          </Field>
          <Field label="Description">
            <input name="description" value={description} onInput={(e) => setDescription(valueOf(e))} />
          </Field>
        </div>
        <EventTypes chosen={types} onChange={setTypes} />
      </Form>
      {secret ? <ShownOnce label={secret.label} secret={secret.value} onDismiss={() => setSecret(undefined)} /> : null}
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {note ? <p role="status">{note}</p> : null}
      {list.items?.length === 0 ? (
        <Empty>No webhook endpoint yet. Add one above to receive quota, key, budget and connection events.</Empty>
      ) : (
        <ListTable caption="Webhook endpoints" columns={['Endpoint', 'Events', 'Status', 'Created', 'Actions']}>
          {list.items?.map((e) => (
            <>
              <tr key={e.id}>
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
                  <button
                    type="button"
                    aria-expanded={open?.id === e.id && open.panel === 'messages'}
                    onClick={() => toggle(e.id, 'messages')}
                  >
                    Messages
                  </button>
                  {e.status === 'ACTIVE' ? (
                    <button type="button" onClick={() => void test(e)} disabled={!!action.working}>
                      Send test event
                    </button>
                  ) : null}
                  <button type="button" aria-expanded={open?.id === e.id && open.panel === 'edit'} onClick={() => toggle(e.id, 'edit')}>
                    Edit
                  </button>
                  <button type="button" onClick={() => void rotate(e)}>
                    Rotate secret
                  </button>
                  {e.status === 'ACTIVE' ? (
                    <button type="button" onClick={() => void disable(e)}>
                      Disable
                    </button>
                  ) : (
                    <button type="button" onClick={() => void enable(e)}>
                      Enable
                    </button>
                  )}
                  <button type="button" class="danger" onClick={() => void remove(e)}>
                    Delete
                  </button>
                </td>
              </tr>
              {open?.id === e.id ? (
                <tr key={`${e.id}-${open.panel}`}>
                  <td colSpan={5}>
                    {open.panel === 'messages' ? (
                      <Messages client={client} endpoint={e} version={sent} />
                    ) : (
                      <EditEndpoint
                        client={client}
                        endpoint={e}
                        onDone={() => {
                          setOpen(undefined);
                          list.reload();
                        }}
                      />
                    )}
                  </td>
                </tr>
              ) : null}
            </>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}
