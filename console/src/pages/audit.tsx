import { useState } from 'preact/hooks';
import { listAuditLogs } from '../api.js';
import type { PageProps } from '../main.js';
import { Empty, ErrorNote, Field, Pager, usePaged, valueOf, when, Working, ListTable } from '../ui.js';

export function AuditPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [filters, setFilters] = useState({ action: '', resourceType: '', resourceId: '', since: '', until: '' });
  const list = usePaged(
    (cursor) =>
      listAuditLogs({
        client,
        path: { workspaceId },
        query: {
          cursor,
          limit: 20,
          ...(filters.action ? { action: filters.action } : {}),
          ...(filters.resourceType ? { resourceType: filters.resourceType } : {}),
          ...(filters.resourceId ? { resourceId: filters.resourceId } : {}),
          ...(filters.since ? { since: new Date(filters.since).toISOString() } : {}),
          ...(filters.until ? { until: new Date(filters.until).toISOString() } : {}),
        },
      }),
    [workspaceId, filters],
  );
  const set = (field: keyof typeof filters) => (e: Event) => setFilters({ ...filters, [field]: valueOf(e) });
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Audit log</h1>
      <p class="lead">Every change made through the Admin API, newest first, with the key that made it.</p>
      <form class="toolbar filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <Field label="Action">
          <input name="action" placeholder="access.suspended" value={filters.action} onChange={set('action')} />
        </Field>
        <Field label="Resource type">
          <input name="resourceType" value={filters.resourceType} onChange={set('resourceType')} />
        </Field>
        <Field label="Resource id">
          <input name="resourceId" value={filters.resourceId} onChange={set('resourceId')} />
        </Field>
        <Field label="Since (your local time)">
          <input name="since" type="datetime-local" value={filters.since} onChange={set('since')} />
        </Field>
        <Field label="Until (your local time)">
          <input name="until" type="datetime-local" value={filters.until} onChange={set('until')} />
        </Field>
        {Object.values(filters).some(Boolean) ? (
          <button type="button" onClick={() => setFilters({ action: '', resourceType: '', resourceId: '', since: '', until: '' })}>
            Clear the filters
          </button>
        ) : null}
      </form>
      <Working label={list.loading ? 'Loading the audit log…' : undefined} keepSpace />
      <ErrorNote problem={list.problem} />
      {list.items?.length === 0 ? (
        <Empty>
          {Object.values(filters).some(Boolean)
            ? 'No audit entry matches these filters.'
            : 'No audit entry yet. Entries appear as soon as anything in this workspace is changed.'}
        </Empty>
      ) : (
        <ListTable caption="Audit log" columns={['When', 'Action', 'Resource', 'Key', 'Changes']}>
          {list.items?.map((a) => (
            <tr key={a.id}>
              <td>{when(a.createdAt)}</td>
              <td>{a.action}</td>
              <td>
                {a.resourceType}
                <div class="id">{a.resourceId}</div>
              </td>
              <td class="id">{a.actorKeyId}</td>
              <td>
                <code class="changes">{JSON.stringify(a.changes)}</code>
              </td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}
