/**
 * One call of the invocations page, in full: who made it, through what, what it cost, how long each part took, each
 * attempt, and its request and answer where a request log was kept. A Realtime session's invocation shows how it
 * closed and its turns; a turn links to its session. A batch's invocation shows its batch: counts, bound, cost.
 */
import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { getInvocation, listInvocations, type Client, type InvocationDto } from '../api.js';
import { BatchFigures } from '../components/batch.js';
import { ListTable } from '../components/lists.js';
import { formatMoney, formatNumber, when } from '../format.js';
import { kindsText } from '../kinds.js';
import { useAction, useRead } from '../hooks.js';
import { Empty, ErrorNote, Figures, Status } from '../ui.js';
import { RequestLog } from './request-log.js';

export const ms = (v: number | undefined) => (v === undefined ? '—' : `${v.toFixed(1)} ms`);

/** A cost in millionths of the workspace's currency, as the operator's locale writes money (exact, up to 6 decimals). */
function money(micros: string | undefined, currency: string): string {
  return micros === undefined ? '—' : formatMoney(micros, currency);
}

/** A call's tokens: input (cached) → output; none when it was not charged. */
export function tokens(i: InvocationDto): string {
  if (i.inputTokens === undefined) return '—';
  const cached = i.cachedInputTokens && i.cachedInputTokens !== '0' ? ` (${formatNumber(i.cachedInputTokens)} cached)` : '';
  return `${formatNumber(i.inputTokens)}${cached} → ${formatNumber(i.outputTokens)}`;
}

/** A status and, when the call did not succeed, why (its error code). */
export function StatusWithReason({ invocation }: { invocation: InvocationDto }) {
  return (
    <>
      <Status value={invocation.status} /> {invocation.errorCode ? <span class="id">{invocation.errorCode}</span> : null}
    </>
  );
}

interface Shown {
  invocation: InvocationDto;
  workspaceId: string;
  /** A connection's link, by its name. */
  connection: (connectionId: string) => JSX.Element;
}

/** What the call was: its status and error, its user, key, route or connection, path, model, tokens, units and cost. */
function CallFigures({ invocation, workspaceId, connection, currency }: Shown & { currency: string }) {
  const user = invocation.user;
  return (
    <dl class="figures">
      <dt>Status</dt>
      <dd>
        <StatusWithReason invocation={invocation} />
      </dd>
      {invocation.errorMessage ? (
        <>
          <dt>{invocation.attempt?.httpStatus ? `Error (upstream HTTP ${invocation.attempt.httpStatus})` : 'Error'}</dt>
          <dd class="error-message">{invocation.errorMessage}</dd>
        </>
      ) : null}
      <dt>User</dt>
      <dd>
        {user ? (
          <>
            <a href={`#/w/${workspaceId}/users/${encodeURIComponent(user.externalUserId)}`}>{user.externalUserId}</a> (external id) ·{' '}
            {user.name ? `${user.name} · ` : ''}
            {user.email}
          </>
        ) : (
          '—'
        )}
        <div class="id">access {invocation.workspaceAccessId}</div>
      </dd>
      <dt>Inference key</dt>
      <dd>{invocation.inferenceKeyId ? <a href={`#/w/${workspaceId}/keys`}>{invocation.inferenceKeyId}</a> : '—'}</dd>
      <dt>{invocation.routeId ? 'Route' : 'Connection'}</dt>
      <dd>
        {invocation.routeId ? (
          <>
            <a href={`#/w/${workspaceId}/routes`}>{invocation.routeId}</a> (answered by {connection(invocation.providerConnectionId)})
          </>
        ) : (
          connection(invocation.providerConnectionId)
        )}
      </dd>
      <dt>Path</dt>
      <dd>
        <code>
          {invocation.method ?? ''} {invocation.endpoint ?? ''}
        </code>
        {invocation.streamed ? ' (stream)' : ' (not a stream)'}
      </dd>
      <dt>Model</dt>
      <dd>
        {invocation.requestedModel || '—'}
        {invocation.attempt?.upstreamModel && invocation.attempt.upstreamModel !== invocation.requestedModel
          ? ` (the provider answered as ${invocation.attempt.upstreamModel})`
          : ''}
      </dd>
      <dt>Tokens (input → output)</dt>
      <dd>{tokens(invocation)}</dd>
      {kindsText(invocation) ? (
        <>
          <dt>Beyond text</dt>
          <dd class="kinds">{kindsText(invocation)}</dd>
        </>
      ) : null}
      <dt>Units charged</dt>
      <dd>{formatNumber(invocation.quotaUnits)}</dd>
      <dt>Cost</dt>
      <dd>{money(invocation.costMicros ?? invocation.batch?.costMicros, currency)}</dd>
      <dt>Started</dt>
      <dd>{when(invocation.startedAt)}</dd>
      <dt>Request id</dt>
      <dd>
        <code>{invocation.requestId}</code>
      </dd>
      {invocation.traceId ? (
        <>
          <dt>Trace id</dt>
          <dd>
            <code>{invocation.traceId}</code>
          </dd>
        </>
      ) : null}
    </dl>
  );
}

/** Where the time went: the provider's share of the total as a bar, then each part and the times to the first token. */
function Latency({ invocation }: { invocation: InvocationDto }) {
  const total = invocation.totalLatencyMs ?? 0;
  const provider = invocation.providerLatencyMs ?? 0;
  const share = total > 0 ? (provider / total) * 100 : 0;
  return (
    <>
      <h3>Latency</h3>
      <div class="bar latency" role="img" aria-label={`Provider ${ms(invocation.providerLatencyMs)} of ${ms(invocation.totalLatencyMs)}`}>
        <span class="provider" style={{ width: `${share}%` }} />
        <span class="nexus" style={{ width: `${100 - share}%` }} />
      </div>
      <Figures
        items={[
          ['Total', ms(invocation.totalLatencyMs)],
          ['Provider', ms(invocation.providerLatencyMs)],
          ['Nexus', ms(invocation.nexusLatencyMs)],
          [
            'Time to first token (total / provider / Nexus)',
            `${ms(invocation.totalTtftMs)} / ${ms(invocation.providerTtftMs)} / ${ms(invocation.nexusTtftMs)}`,
          ],
        ]}
      />
    </>
  );
}

/** The providers the call tried, in order, and the usage events it was charged. */
function AttemptsAndEvents({ invocation, connection }: Shown) {
  return (
    <>
      <h3>Provider attempts</h3>
      {invocation.attempts?.length ? (
        <ListTable columns={['#', 'Connection', 'Model', 'Status', 'HTTP', 'Duration', 'Reason']}>
          {invocation.attempts.map((a) => (
            <tr key={a.id}>
              <td class="num">{a.sequence}</td>
              <td>{connection(a.providerConnectionId)}</td>
              <td>{a.upstreamModel || '—'}</td>
              <td>
                <Status value={a.status} />
              </td>
              <td class="num">{a.httpStatus ?? '—'}</td>
              <td class="num">{ms(a.durationMs)}</td>
              <td>{a.errorCode ?? ''}</td>
            </tr>
          ))}
        </ListTable>
      ) : (
        <Empty>No attempt: the call was refused before the provider was called.</Empty>
      )}
      <h3>Usage events</h3>
      {invocation.usageEvents?.length ? (
        <ListTable columns={['Kind', 'Units', 'Input', 'Cached', 'Output', 'At']}>
          {invocation.usageEvents.map((u) => (
            <tr key={u.id}>
              <td>{u.kind}</td>
              <td class="num">{formatNumber(u.units)}</td>
              <td class="num">{formatNumber(u.inputTokens)}</td>
              <td class="num">{formatNumber(u.cachedInputTokens)}</td>
              <td class="num">{formatNumber(u.outputTokens)}</td>
              <td>{when(u.createdAt)}</td>
            </tr>
          ))}
        </ListTable>
      ) : (
        <Empty>No usage event: the call was not charged.</Empty>
      )}
    </>
  );
}

/** How a Realtime session closed (the WebSocket's code and why), its latency to first audio, and its turns, oldest first. */
function RealtimeSession({ invocation, client, workspaceId }: { invocation: InvocationDto; client: Client; workspaceId: string }) {
  const session = invocation.session!;
  const [turns, setTurns] = useState<InvocationDto[] | undefined>();
  const action = useAction();
  // Its turns share its request id, which the list's search finds; newest first there (its first 100 are shown).
  useRead(
    async () => (await listInvocations({ client, path: { workspaceId }, query: { q: invocation.requestId, limit: 100 } })).data,
    (found) => setTurns((found ?? []).filter((i) => i.sessionId === invocation.id).reverse()),
    [invocation.id],
    { action, label: 'Reading its turns…' },
  );
  return (
    <>
      <h3>Realtime session</h3>
      <Figures
        items={[
          ['Turns', formatNumber(String(session.turns))],
          ['Closed', `${session.closeCode} · ${session.closeReason}`],
          ['Latency to first audio', ms(session.firstAudioMs)],
        ]}
      />
      <h3>Turns</h3>
      {turns?.length ? (
        <ListTable caption="Turns of the session" columns={['#', 'Status', 'Tokens (input → output)', 'Units', 'First output', 'Started']}>
          {turns.map((turn, i) => (
            <tr key={turn.id}>
              <td class="num">
                <a href={`#/invocations/${turn.id}`}>{i + 1}</a>
              </td>
              <td>
                <StatusWithReason invocation={turn} />
              </td>
              <td>{tokens(turn)}</td>
              <td class="num">{formatNumber(turn.quotaUnits)}</td>
              <td class="num">{ms(turn.totalTtftMs)}</td>
              <td>{when(turn.startedAt)}</td>
            </tr>
          ))}
        </ListTable>
      ) : (
        <>
          <ErrorNote problem={action.problem} />
          <Empty>{turns ? 'No turn: the session closed before the model answered.' : 'Reading its turns…'}</Empty>
        </>
      )}
    </>
  );
}

export function InvocationDetail(props: {
  client: Client;
  workspaceId: string;
  currency: string;
  id: string;
  connections: Record<string, string>;
  onClose: () => void;
}) {
  const { client, workspaceId, id, connections } = props;
  const [invocation, setInvocation] = useState<InvocationDto | undefined>();
  const action = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => setInvocation(undefined), [id]);
  useRead(async () => (await getInvocation({ client, path: { invocationId: id } })).data, setInvocation, [id], {
    action,
    label: 'Reading the invocation…',
  });
  // Opened from a row far down the list: brought into view, and focused for a screen reader.
  useEffect(() => {
    if (!invocation || !heading.current) return;
    heading.current.scrollIntoView({ block: 'start' });
    heading.current.focus();
  }, [invocation?.id]);
  if (!invocation) return <ErrorNote problem={action.problem} />;
  const connection = (connectionId: string) => <a href={`#/w/${workspaceId}/connections`}>{connections[connectionId] ?? connectionId}</a>;
  const shown = { invocation, workspaceId, connection };
  return (
    <section class="card detail" aria-labelledby="detail-title">
      <h2 id="detail-title" ref={heading} tabIndex={-1}>
        Call {invocation.requestId}
      </h2>
      <p>
        <button type="button" onClick={props.onClose}>
          Close
        </button>{' '}
        Link to this call: <a href={`#/invocations/${invocation.id}`}>#/invocations/{invocation.id}</a>
      </p>
      {invocation.sessionId ? (
        <p>
          A turn of the Realtime session <a href={`#/invocations/${invocation.sessionId}`}>{invocation.sessionId}</a>.
        </p>
      ) : null}
      <CallFigures {...shown} currency={props.currency} />
      {invocation.session ? <RealtimeSession invocation={invocation} client={client} workspaceId={workspaceId} /> : null}
      {invocation.batch ? <BatchFigures batch={invocation.batch} currency={props.currency} /> : null}
      <Latency invocation={invocation} />
      <AttemptsAndEvents {...shown} />
      <RequestLog client={client} invocationId={invocation.id} />
    </section>
  );
}
