import { listAuditLogs } from '../api.js';
import { PagedTable } from '../components/lists.js';
import { rangeOf, when } from '../format.js';
import { onlySet, useFields, usePaged } from '../hooks.js';
import { ErrorNote, Input, LocalTimeInput, Page, Toolbar, Working, type PageProps } from '../ui.js';

const NO_FILTERS = { action: '', resourceType: '', resourceId: '', since: '', until: '' };

export function AuditPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const filters = useFields(NO_FILTERS);
  const { action, resourceType, resourceId, since, until } = filters.values;
  const filtered = Object.values(filters.values).some(Boolean);
  const query = { ...onlySet({ action, resourceType, resourceId }), ...rangeOf(since, until) };
  const list = usePaged(
    (page) => listAuditLogs({ client, path: { workspaceId }, query: { ...page, ...query } }),
    [workspaceId, filters.values],
  );
  return (
    <Page title="Audit log" lead="Every change made through the Admin API, newest first, with the key that made it.">
      <Toolbar class="toolbar filters" label="Filters">
        <Input label="Action" name="action" placeholder="access.suspended" {...filters.bindChange('action')} />
        <Input label="Resource type" name="resourceType" {...filters.bindChange('resourceType')} />
        <Input label="Resource id" name="resourceId" {...filters.bindChange('resourceId')} />
        <LocalTimeInput label="Since" name="since" {...filters.bindChange('since')} />
        <LocalTimeInput label="Until" name="until" {...filters.bindChange('until')} />
        {filtered ? (
          <button type="button" onClick={filters.reset}>
            Clear the filters
          </button>
        ) : null}
      </Toolbar>
      <Working label={list.loading ? 'Loading the audit log…' : undefined} keepSpace />
      <ErrorNote problem={list.problem} />
      <PagedTable
        list={list}
        caption="Audit log"
        columns={['When', 'Action', 'Resource', 'Key', 'Changes']}
        empty={
          filtered
            ? 'No audit entry matches these filters.'
            : 'No audit entry yet. Entries appear as soon as anything in this workspace is changed.'
        }
        row={(a) => (
          <tr>
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
        )}
      />
    </Page>
  );
}
