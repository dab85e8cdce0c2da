import { useEffect, useState } from 'preact/hooks';
import { getInvocation, listInvocations, type InvocationDto } from '../api.js';
import type { PageProps } from '../main.js';
import { Empty, ErrorNote, Field, Pager, Status, usePaged, useAction, valueOf, when, Working, ListTable } from '../ui.js';

type InvocationStatus = 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'FAILED' | 'CLIENT_ABORTED' | 'REJECTED';
const ms = (v: number | undefined) => (v === undefined ? '—' : `${v.toFixed(1)} ms`);

function Detail({ client, id, onClose }: { client: PageProps['client']; id: string; onClose: () => void }) {
  const [invocation, setInvocation] = useState<InvocationDto | undefined>();
  const action = useAction();
  useEffect(() => {
    void action.run('Reading the invocation…', async () =>
      setInvocation((await getInvocation({ client, path: { invocationId: id } })).data),
    );
  }, [id]);
  if (!invocation) return <ErrorNote problem={action.problem} />;
  const total = invocation.totalLatencyMs ?? 0;
  const provider = invocation.providerLatencyMs ?? 0;
  const share = total > 0 ? (provider / total) * 100 : 0;
  return (
    <section class="card detail" aria-labelledby="detail-title">
      <h2 id="detail-title">Invocation {invocation.requestId}</h2>
      <button type="button" onClick={onClose}>
        Close
      </button>
      <dl class="figures">
        <dt>Status</dt>
        <dd>
          <Status value={invocation.status} /> {invocation.errorCode ?? ''}
        </dd>
        <dt>Model</dt>
        <dd>{invocation.requestedModel || '—'}</dd>
        <dt>Units charged</dt>
        <dd>{invocation.quotaUnits}</dd>
        <dt>Started</dt>
        <dd>{when(invocation.startedAt)}</dd>
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
              <td>{u.units}</td>
              <td>{u.inputTokens}</td>
              <td>{u.cachedInputTokens}</td>
              <td>{u.outputTokens}</td>
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

export function InvocationsPage({ client, workspace, rest }: PageProps) {
  const workspaceId = workspace.id;
  const [filters, setFilters] = useState({
    status: '' as InvocationStatus | '',
    model: '',
    workspaceAccessId: rest[0] === 'access' ? (rest[1] ?? '') : '',
    since: '',
    until: '',
  });
  const [open, setOpen] = useState<string | undefined>();
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
      {open ? <Detail client={client} id={open} onClose={() => setOpen(undefined)} /> : null}
      {list.items?.length === 0 ? (
        <Empty>
          No invocation matches. Calls appear here once a user calls the gateway with an inference key (a connection's gateway base URL).
        </Empty>
      ) : (
        <ListTable caption="Invocations" columns={['Started', 'Model', 'Status', 'Units', 'Latency', 'Access', 'Detail']}>
          {list.items?.map((i) => (
            <tr key={i.id}>
              <td>{when(i.startedAt)}</td>
              <td>{i.requestedModel || '—'}</td>
              <td>
                <Status value={i.status} />
              </td>
              <td>{i.quotaUnits}</td>
              <td>{ms(i.totalLatencyMs)}</td>
              <td class="id">{i.workspaceAccessId}</td>
              <td>
                <button type="button" onClick={() => setOpen(i.id)}>
                  Open {i.requestId.slice(0, 12)}
                </button>
              </td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}
