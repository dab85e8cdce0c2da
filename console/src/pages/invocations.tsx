import { useEffect, useRef, useState } from 'preact/hooks';
import { getInvocation, listInvocations, listProviderConnections, listWorkspaceUsers, type InvocationDto } from '../api.js';
import type { PageProps } from '../main.js';
import {
  Empty,
  ErrorNote,
  Field,
  Pager,
  Status,
  usePaged,
  useAction,
  useAccessNames,
  valueOf,
  when,
  Working,
  ListTable,
  formatNumber,
} from '../ui.js';

type InvocationStatus = 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'FAILED' | 'CLIENT_ABORTED' | 'REJECTED';
const ms = (v: number | undefined) => (v === undefined ? '—' : `${v.toFixed(1)} ms`);

/** The user behind an access: external id, email and name, linked to the users page. */
function UserOf({ client, workspaceId, accessId }: { client: PageProps['client']; workspaceId: string; accessId: string }) {
  const names = useAccessNames(client, [accessId]);
  const externalUserId = names[accessId];
  const [user, setUser] = useState<{ email: string; name?: string | undefined } | undefined>();
  useEffect(() => {
    if (!externalUserId) return;
    listWorkspaceUsers({ client, path: { workspaceId }, query: { externalUserId, limit: 1 } })
      .then((page) => setUser(page.data[0]))
      .catch(() => setUser(undefined));
  }, [externalUserId]);
  return (
    <>
      {externalUserId ? <a href={`#/w/${workspaceId}/users/${encodeURIComponent(externalUserId)}`}>{externalUserId}</a> : '…'}
      {user ? ` · ${user.name ? `${user.name} · ` : ''}${user.email}` : ''}
      <div class="id">access {accessId}</div>
    </>
  );
}

function Detail({
  client,
  workspaceId,
  id,
  connections,
  onClose,
}: {
  client: PageProps['client'];
  workspaceId: string;
  id: string;
  connections: Record<string, string>;
  onClose: () => void;
}) {
  const [invocation, setInvocation] = useState<InvocationDto | undefined>();
  const action = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    void action.run('Reading the invocation…', async () =>
      setInvocation((await getInvocation({ client, path: { invocationId: id } })).data),
    );
  }, [id]);
  // Opened from a row far down the list: brought into view, and focused for a screen reader.
  useEffect(() => {
    if (!invocation || !heading.current) return;
    heading.current.scrollIntoView({ block: 'start' });
    heading.current.focus();
  }, [invocation?.id]);
  if (!invocation) return <ErrorNote problem={action.problem} />;
  const total = invocation.totalLatencyMs ?? 0;
  const provider = invocation.providerLatencyMs ?? 0;
  const share = total > 0 ? (provider / total) * 100 : 0;
  return (
    <section class="card detail" aria-labelledby="detail-title">
      <h2 id="detail-title" ref={heading} tabIndex={-1}>
        Invocation {invocation.requestId}
      </h2>
      <button type="button" onClick={onClose}>
        Close
      </button>
      <dl class="figures">
        <dt>Status</dt>
        <dd>
          <Status value={invocation.status} /> {invocation.errorCode ?? ''}
        </dd>
        <dt>User</dt>
        <dd>
          <UserOf client={client} workspaceId={workspaceId} accessId={invocation.workspaceAccessId} />
        </dd>
        <dt>Model</dt>
        <dd>{invocation.requestedModel || '—'}</dd>
        <dt>Connection</dt>
        <dd>
          {invocation.providerConnectionId ? (
            <a href={`#/w/${workspaceId}/connections`}>{connections[invocation.providerConnectionId] ?? invocation.providerConnectionId}</a>
          ) : (
            '—'
          )}
        </dd>
        <dt>Units charged</dt>
        <dd>{formatNumber(invocation.quotaUnits)}</dd>
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
      <h3>Latency</h3>
      <div class="bar latency" role="img" aria-label={`Provider ${ms(invocation.providerLatencyMs)} of ${ms(invocation.totalLatencyMs)}`}>
        <span class="provider" style={{ width: `${share}%` }} />
        <span class="nexus" style={{ width: `${100 - share}%` }} />
      </div>
      <dl class="figures">
        <dt>Total</dt>
        <dd>{ms(invocation.totalLatencyMs)}</dd>
        <dt>Provider</dt>
        <dd>{ms(invocation.providerLatencyMs)}</dd>
        <dt>Nexus</dt>
        <dd>{ms(invocation.nexusLatencyMs)}</dd>
        <dt>Time to first token (total / provider / Nexus)</dt>
        <dd>
          {ms(invocation.totalTtftMs)} / {ms(invocation.providerTtftMs)} / {ms(invocation.nexusTtftMs)}
        </dd>
      </dl>
      {invocation.attempt ? (
        <>
          <h3>Provider attempt</h3>
          <p>
            {invocation.attempt.upstreamModel || '(no model named)'}: <Status value={invocation.attempt.status} /> HTTP{' '}
            {invocation.attempt.httpStatus ?? '—'} in {ms(invocation.attempt.durationMs)} {invocation.attempt.errorCode ?? ''}
          </p>
        </>
      ) : null}
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
    </section>
  );
}

const NO_FILTERS = { status: '' as InvocationStatus | '', model: '', workspaceAccessId: '', since: '', until: '' };

/**
 * The calls, newest first. Routes: #/w/<ws>/invocations, …/invocations/access/<accessId> (one user's),
 * …/invocations/<invocationId> (one call's detail, a link to quote).
 */
export function InvocationsPage({ client, workspace, rest }: PageProps) {
  const workspaceId = workspace.id;
  const [filters, setFilters] = useState({ ...NO_FILTERS, workspaceAccessId: rest[0] === 'access' ? (rest[1] ?? '') : '' });
  const open = rest[0] && rest[0] !== 'access' ? rest[0] : undefined;
  const base = `#/w/${workspaceId}/invocations`;
  const [connections, setConnections] = useState<Record<string, string>>({});
  useEffect(() => {
    listProviderConnections({ client, path: { workspaceId }, query: { limit: 100 } })
      .then((page) => setConnections(Object.fromEntries(page.data.map((c) => [c.id, c.name]))))
      .catch(() => setConnections({}));
  }, [workspaceId]);
  const list = usePaged(
    (cursor) =>
      listInvocations({
        client,
        path: { workspaceId },
        query: {
          cursor,
          limit: 20,
          ...(filters.status ? { status: filters.status } : {}),
          ...(filters.model ? { model: filters.model } : {}),
          ...(filters.workspaceAccessId ? { workspaceAccessId: filters.workspaceAccessId } : {}),
          ...(filters.since ? { since: new Date(filters.since).toISOString() } : {}),
          ...(filters.until ? { until: new Date(filters.until).toISOString() } : {}),
        },
      }),
    [workspaceId, filters],
  );
  const set = (field: keyof typeof filters) => (e: Event) => setFilters({ ...filters, [field]: valueOf(e) });
  const filtered = Object.values(filters).some(Boolean);
  const users = useAccessNames(client, list.items?.map((i) => i.workspaceAccessId) ?? []);
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Invocations</h1>
      <p class="lead">One row per gateway call, newest first.</p>
      <form class="toolbar filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <Field label="Status">
          <select name="status" value={filters.status} onChange={set('status')}>
            <option value="">Any</option>
            {['SUCCEEDED', 'UPSTREAM_ERROR', 'FAILED', 'CLIENT_ABORTED', 'REJECTED'].map((s) => (
              <option key={s} value={s}>
                {s.toLowerCase().replace('_', ' ')}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Model (exactly)">
          <input name="model" value={filters.model} onChange={set('model')} />
        </Field>
        <Field label="Access id">
          <input name="workspaceAccessId" value={filters.workspaceAccessId} onChange={set('workspaceAccessId')} />
        </Field>
        <Field label="Since">
          <input name="since" type="datetime-local" value={filters.since} onChange={set('since')} />
        </Field>
        <Field label="Until">
          <input name="until" type="datetime-local" value={filters.until} onChange={set('until')} />
        </Field>
        <button type="button" onClick={list.reload}>
          Refresh
        </button>
      </form>
      <Working label={list.loading ? 'Loading invocations…' : undefined} />
      <ErrorNote problem={list.problem} />
      {open ? (
        <Detail
          client={client}
          workspaceId={workspaceId}
          id={open}
          connections={connections}
          onClose={() => (window.location.hash = base)}
        />
      ) : null}
      {list.items?.length === 0 ? (
        filtered ? (
          <Empty>
            No invocation matches these filters.{' '}
            <button type="button" onClick={() => setFilters(NO_FILTERS)}>
              Clear the filters
            </button>
          </Empty>
        ) : (
          <Empty>
            No invocation yet. Calls appear here once a user calls the gateway with an inference key (a connection's gateway base URL).
          </Empty>
        )
      ) : (
        <ListTable caption="Invocations" columns={['Started', 'Request', 'User', 'Model', 'Status', 'Units', 'Latency']}>
          {list.items?.map((i) => (
            <tr key={i.id} aria-current={open === i.id ? 'true' : undefined}>
              <td>{when(i.startedAt)}</td>
              <td>
                <a href={`${base}/${i.id}`} title="Open this call's detail">
                  <code>{i.requestId}</code>
                </a>
              </td>
              <td>
                <a href={`#/w/${workspaceId}/users/${encodeURIComponent(users[i.workspaceAccessId] ?? '')}`}>
                  {users[i.workspaceAccessId] ?? i.workspaceAccessId}
                </a>
              </td>
              <td>{i.requestedModel || '—'}</td>
              <td>
                <Status value={i.status} /> {i.errorCode ? <span class="id">{i.errorCode}</span> : null}
              </td>
              <td class="num">{formatNumber(i.quotaUnits)}</td>
              <td class="num">{ms(i.totalLatencyMs)}</td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}
