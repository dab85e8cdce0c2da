/** A webhook endpoint's messages (its deliveries), each with its attempts; replayed one by one, or every failed one since a time. */
import { useState } from 'preact/hooks';
import {
  idempotent,
  listWebhookMessages,
  replayFailedWebhookMessages,
  replayWebhookMessage,
  type Client,
  type WebhookEndpointDto,
  type WebhookMessageDto,
  type WebhookMessageStatus,
} from '../api.js';
import { ActionButton, ExpandButton, useOpenRow } from '../components/buttons.js';
import { ListTable, PagedTable } from '../components/lists.js';
import { localNow, toInstant, when } from '../format.js';
import { onlySet, useAction, usePaged, valueOf } from '../hooks.js';
import { ActionNotes, Empty, Form, LocalTimeInput, Notice, Select, Status } from '../ui.js';

/** A message's attempts, newest last: when, the outcome, the receiver's status and answer, or why none came. */
function Attempts({ message }: { message: WebhookMessageDto }) {
  return (
    <>
      {message.attempts.length === 0 ? (
        <Empty>No attempt yet: the message is queued.</Empty>
      ) : (
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
      )}
      <details>
        <summary>The event as sent</summary>
        <pre>
          <code>{JSON.stringify(message.payload, null, 2)}</code>
        </pre>
      </details>
    </>
  );
}

/** An endpoint's messages (its deliveries), filtered by status, each with its attempts; replay one, or every failed one since a time. */
export function Messages({ client, endpoint, version }: { client: Client; endpoint: WebhookEndpointDto; version: number }) {
  const [status, setStatus] = useState<WebhookMessageStatus | ''>('');
  const rows = useOpenRow();
  const [since, setSince] = useState(() => localNow(-86_400_000));
  const [done, setDone] = useState<string | undefined>();
  const action = useAction();
  const webhookEndpointId = endpoint.id;
  const list = usePaged(
    (page) => listWebhookMessages({ client, path: { webhookEndpointId }, query: { ...page, ...onlySet({ status }) } }),
    [webhookEndpointId, status, version],
  );
  const replayFailed = async () => {
    setDone(undefined);
    const body = { since: toInstant(since) };
    const res = await action.run('Replaying the failed messages…', () =>
      replayFailedWebhookMessages({ client, path: { webhookEndpointId }, body, headers: idempotent() }),
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
        <Select
          label="Status"
          name="messageStatus"
          choices={{ '': 'Any', PENDING: 'Pending', DELIVERED: 'Delivered', FAILED: 'Failed' }}
          value={status}
          onChange={(e) => setStatus(valueOf(e) as WebhookMessageStatus | '')}
        />
        <button type="button" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      <Form
        operation="replayFailedWebhookMessages"
        title={`Replay failed messages to ${endpoint.url}`}
        submit="Replay failed"
        onSubmit={replayFailed}
        disabled={!!action.working}
      >
        <LocalTimeInput label="Failed since" name="since" required value={since} onInput={(e) => setSince(valueOf(e))} />
      </Form>
      <ActionNotes action={action} problem={list.problem} />
      <Notice text={done} />
      <PagedTable
        list={list}
        caption={`Messages to ${endpoint.url}`}
        columns={['Created', 'Event', 'Status', 'Attempts', 'Last attempt', 'Actions']}
        empty={status ? `No ${status.toLowerCase()} message.` : 'No message yet. Send a test event to see one.'}
        row={(m) => (
          <tr>
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
              <ExpandButton rows={rows} id={m.id} show={`Attempts (${m.attempts.length})`} hide="Hide attempts" />
              <ActionButton
                operation="replayWebhookMessage"
                action={action}
                disabled={!!action.working}
                label="Replaying…"
                call={() => {
                  setDone(undefined);
                  return replayWebhookMessage({ client, path: { webhookEndpointId, messageId: m.id }, headers: idempotent() });
                }}
                onDone={() => {
                  setDone(`Message ${m.id} is queued again.`);
                  list.reload();
                }}
              >
                Replay
              </ActionButton>
            </td>
          </tr>
        )}
        detail={(m) => (rows.is(m.id) ? <Attempts message={m} /> : null)}
      />
    </section>
  );
}
