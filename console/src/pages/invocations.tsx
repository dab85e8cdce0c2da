import { useEffect, useRef, useState } from 'preact/hooks';
import { exportInvocations, getInvocation, listInvocations, listProviderConnections, type InvocationDto } from '../api.js';
import type { PageProps } from '../main.js';
import {
  Empty,
  ErrorNote,
  Field,
  Pager,
  Status,
  usePaged,
  useAction,
  useRead,
  valueOf,
  when,
  Working,
  ListTable,
  formatNumber,
} from '../ui.js';

type InvocationStatus = 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'FAILED' | 'CLIENT_ABORTED' | 'REJECTED';
const ms = (v: number | undefined) => (v === undefined ? '—' : `${v.toFixed(1)} ms`);

/** A cost in millionths of the workspace's currency, as the operator's locale writes money (up to 6 decimals). */
function money(micros: string | undefined, currency: string): string {
  if (micros === undefined) return '—';
  return new Intl.NumberFormat(undefined, { style: 'currency', currency, maximumFractionDigits: 6 }).format(Number(micros) / 1_000_000);
}

/** A call's tokens: input (cached) → output; none when it was not charged. */
function tokens(i: InvocationDto): string {
  if (i.inputTokens === undefined) return '—';
  const cached = i.cachedInputTokens && i.cachedInputTokens !== '0' ? ` (${formatNumber(i.cachedInputTokens)} cached)` : '';
  return `${formatNumber(i.inputTokens)}${cached} → ${formatNumber(i.outputTokens)}`;
}

/** The end user of a call, linked to the users page; its access's id when the user could not be read. */
function UserLink({ workspaceId, invocation }: { workspaceId: string; invocation: InvocationDto }) {
  const user = invocation.user;
  if (!user) return <span class="id">access {invocation.workspaceAccessId}</span>;
  return (
    <>
      <a href={`#/w/${workspaceId}/users/${encodeURIComponent(user.externalUserId)}`}>{user.externalUserId}</a>
      <div class="id">{user.name ? `${user.name} · ${user.email}` : user.email}</div>
    </>
  );
}

/** A status and, when the call did not succeed, why (its error code). */
function StatusWithReason({ invocation }: { invocation: InvocationDto }) {
  return (
    <>
      <Status value={invocation.status} /> {invocation.errorCode ? <span class="id">{invocation.errorCode}</span> : null}
    </>
  );
}

function Detail({
  client,
  workspaceId,
  currency,
  id,
  connections,
  onClose,
}: {
  client: PageProps['client'];
  workspaceId: string;
  currency: string;
  id: string;
  connections: Record<string, string>;
  onClose: () => void;
}) {
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
  const total = invocation.totalLatencyMs ?? 0;
  const provider = invocation.providerLatencyMs ?? 0;
  const share = total > 0 ? (provider / total) * 100 : 0;
  const user = invocation.user;
  const connection = (connectionId: string) => <a href={`#/w/${workspaceId}/connections`}>{connections[connectionId] ?? connectionId}</a>;
  return (
    <section class="card detail" aria-labelledby="detail-title">
      <h2 id="detail-title" ref={heading} tabIndex={-1}>
        Call {invocation.requestId}
      </h2>
      <p>
        <button type="button" onClick={onClose}>
          Close
        </button>{' '}
        Link to this call: <a href={`#/invocations/${invocation.id}`}>#/invocations/{invocation.id}</a>
      </p>
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
        <dt>Units charged</dt>
        <dd>{formatNumber(invocation.quotaUnits)}</dd>
        <dt>Cost</dt>
        <dd>{money(invocation.costMicros, currency)}</dd>
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
    </section>
  );
}

const NO_FILTERS = { q: '', status: '' as InvocationStatus | '', model: '', workspaceAccessId: '', since: '', until: '' };
type Filters = typeof NO_FILTERS;
const STATUSES: InvocationStatus[] = ['SUCCEEDED', 'UPSTREAM_ERROR', 'FAILED', 'CLIENT_ABORTED', 'REJECTED'];

/**
 * The filters the URL carries: a user's calls by its path (`…/invocations/access/<accessId>`), the others in its
 * query (`#/w/<ws>/invocations?status=FAILED&model=gpt-4o`), so that a filtered list can be linked to and outlasts a
 * reload; a status the list does not know is left out.
 */
function filtersOf(rest: string[], query: string): Filters {
  const filters = { ...NO_FILTERS, workspaceAccessId: rest[0] === 'access' ? (rest[1] ?? '') : '' };
  const params = new URLSearchParams(query);
  for (const field of Object.keys(NO_FILTERS) as (keyof Filters)[]) {
    const value = params.get(field);
    if (value && (field !== 'status' || STATUSES.includes(value as InvocationStatus))) Object.assign(filters, { [field]: value });
  }
  return filters;
}

/** The filters set, as a URL's query ('' when none is set). */
function queryOfFilters(filters: Filters): string {
  return new URLSearchParams(Object.entries(filters).filter(([, value]) => value)).toString();
}

/** The filters as the API takes them (listInvocations and exportInvocations alike). */
function queryOf(filters: Filters) {
  return {
    ...(filters.q.trim() ? { q: filters.q.trim() } : {}),
    ...(filters.status ? { status: filters.status } : {}),
    ...(filters.model ? { model: filters.model } : {}),
    ...(filters.workspaceAccessId ? { workspaceAccessId: filters.workspaceAccessId } : {}),
    ...(filters.since ? { since: new Date(filters.since).toISOString() } : {}),
    ...(filters.until ? { until: new Date(filters.until).toISOString() } : {}),
  };
}

/** The current filter's invocations as a CSV file, saved by the browser (the export needs the key: fetched, then saved). */
function ExportButton({ client, workspaceId, filters }: { client: PageProps['client']; workspaceId: string; filters: Filters }) {
  const action = useAction();
  const save = async () => {
    const csv = await action.run('Exporting…', async () => {
      const res = await exportInvocations({ client, path: { workspaceId }, query: queryOf(filters), parseAs: 'text' });
      return res.data;
    });
    if (csv === undefined) return;
    const url = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `invocations-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}.csv`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  };
  return (
    <>
      <button type="button" onClick={() => void save()} disabled={!!action.working}>
        Export CSV
      </button>
      <ErrorNote problem={action.problem} />
    </>
  );
}

/**
 * The calls, newest first. Routes: #/w/<ws>/invocations, …/invocations/access/<accessId> (one user's),
 * …/invocations/<invocationId> (one call's detail; #/invocations/<invocationId> leads there from anywhere).
 */
export function InvocationsPage({ client, workspace, rest, query, setQuery }: PageProps) {
  const workspaceId = workspace.id;
  const [filters, setFilters] = useState<Filters>(() => filtersOf(rest, query));
  const [search, setSearch] = useState(filters.q);
  const open = rest[0] && rest[0] !== 'access' ? rest[0] : undefined;
  const base = `#/w/${workspaceId}/invocations`;
  // The URL's query follows the filters, and the filters a URL the operator goes to (a link; the menu's: none).
  const shown = queryOfFilters(filters);
  const suffix = shown ? `?${shown}` : '';
  useEffect(() => setQuery(shown), [shown]);
  useEffect(() => {
    if (query === shown) return;
    const asked = filtersOf(rest, query);
    setFilters(asked);
    setSearch(asked.q);
  }, [query]);
  const [connections, setConnections] = useState<Record<string, string>>({});
  useEffect(() => {
    listProviderConnections({ client, path: { workspaceId }, query: { limit: 100 } })
      .then((page) => setConnections(Object.fromEntries(page.data.map((c) => [c.id, c.name]))))
      .catch(() => setConnections({}));
  }, [workspaceId]);
  const list = usePaged(
    (cursor) => listInvocations({ client, path: { workspaceId }, query: { cursor, limit: 20, ...queryOf(filters) } }),
    [workspaceId, filters],
  );
  const set = (field: keyof Filters) => (e: Event) => setFilters({ ...filters, [field]: valueOf(e) });
  const filtered = Object.values(filters).some(Boolean);
  const clear = () => {
    setSearch('');
    setFilters(NO_FILTERS);
  };
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Invocations</h1>
      <p class="lead">One row per gateway call, newest first, refused calls included.</p>
      <form
        class="toolbar search"
        role="search"
        aria-label="Find a call"
        onSubmit={(e) => {
          e.preventDefault();
          setFilters({ ...filters, q: search });
        }}
      >
        <Field label="Find" hint="A request id, an invocation id, or a user's email or external id">
          <input name="q" type="search" value={search} onInput={(e) => setSearch(valueOf(e))} />
        </Field>
        <button type="submit">Search</button>
      </form>
      <form class="toolbar filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <Field label="Status">
          <select name="status" value={filters.status} onChange={set('status')}>
            <option value="">Any</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s.toLowerCase().replace('_', ' ')}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Model (begins with)">
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
        {filtered ? (
          <button type="button" onClick={clear}>
            Clear filters
          </button>
        ) : null}
        <ExportButton client={client} workspaceId={workspaceId} filters={filters} />
      </form>
      <Working label={list.loading ? 'Loading invocations…' : undefined} keepSpace />
      <ErrorNote problem={list.problem} />
      {open ? (
        <Detail
          client={client}
          workspaceId={workspaceId}
          currency={workspace.currency ?? 'USD'}
          id={open}
          connections={connections}
          onClose={() => (window.location.hash = base + suffix)}
        />
      ) : null}
      {list.items?.length === 0 ? (
        filtered ? (
          <Empty>
            No invocation matches these filters.{' '}
            <button type="button" onClick={clear}>
              Clear the filters
            </button>
          </Empty>
        ) : (
          <Empty>
            No invocation yet. Calls appear here once a user calls the gateway with an inference key (a connection's gateway base URL).
          </Empty>
        )
      ) : (
        <ListTable
          caption="Invocations"
          columns={['Time', 'Call', 'User', 'Model', 'Endpoint', 'Status', 'Tokens', 'Units', 'Cost', 'Latency']}
        >
          {list.items?.map((i) => (
            <tr key={i.id} aria-current={open === i.id ? 'true' : undefined}>
              <td>{when(i.startedAt)}</td>
              <td>
                <a href={`${base}/${i.id}${suffix}`} aria-label={`Open call ${i.requestId}`}>
                  <code>{i.requestId}</code>
                </a>
              </td>
              <td>
                <UserLink workspaceId={workspaceId} invocation={i} />
              </td>
              <td>{i.requestedModel || '—'}</td>
              <td>
                <code>{i.endpoint ?? ''}</code>
                {i.streamed ? ' (stream)' : ''}
              </td>
              <td>
                <StatusWithReason invocation={i} />
              </td>
              <td class="num">{tokens(i)}</td>
              <td class="num">{formatNumber(i.quotaUnits)}</td>
              <td class="num">{money(i.costMicros, workspace.currency ?? 'USD')}</td>
              <td class="num">{ms(i.totalLatencyMs)}</td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}
