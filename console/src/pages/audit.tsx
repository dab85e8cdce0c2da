import { listAuditLogs, type AuditLogDto } from '../api.js';
import { PagedTable } from '../components/lists.js';
import { rangeOf, when } from '../format.js';
import { onlySet, useFields, usePaged } from '../hooks.js';
import { ErrorNote, Input, LocalTimeInput, Page, Toolbar, Working, type PageProps } from '../ui.js';

const NO_FILTERS = { action: '', resourceType: '', resourceId: '', since: '', until: '' };

/** The console page that shows each kind of resource (the resource's own view where the page opens one by id). */
const PAGE_OF: Record<string, (id: string) => string> = {
  workspace: () => 'settings',
  provider_connection: () => 'connections',
  route: () => 'routes',
  plan: () => 'plans',
  quota_strategy: () => 'plans',
  plan_strategy_binding: () => 'plans',
  workspace_access: (id) => `keys/${id}`,
  inference_key: () => 'keys',
  billing_connection: () => 'billing',
  billing_product_mapping: () => 'billing',
  billing_checkout: () => 'billing',
  billing_period_sync: () => 'billing',
  billing_webhook_event: () => 'billing',
  webhook_endpoint: () => 'webhooks',
  model_price: () => 'prices',
  management_key: () => '',
};

/** Where an entry's resource is shown in the console, if it is. */
function resourceHref(workspaceId: string, entry: AuditLogDto): string | undefined {
  const page = PAGE_OF[entry.resourceType];
  if (!page) return undefined;
  const path = page(entry.resourceId);
  return path ? `#/w/${workspaceId}/${path}` : '#/management-keys';
}

/** Who made the change: the key's name (its id under it); the root key of NEXUS_MANAGEMENT_KEY and Nexus's own work by what they are. */
function Actor({ entry }: { entry: AuditLogDto }) {
  const name = entry.actorName ?? (entry.actorKeyId === 'root' ? 'root key (NEXUS_MANAGEMENT_KEY)' : undefined);
  return name ? (
    <>
      {name}
      <div class="id">{entry.actorKeyId}</div>
    </>
  ) : (
    <span class="id">{entry.actorKeyId}</span>
  );
}

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
    <Page
      title="Audit log"
      lead="Every change made through the Admin API, newest first, with the key that made it (by the name it has now on the Management keys page)."
    >
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
              {resourceHref(workspaceId, a) ? <a href={resourceHref(workspaceId, a)}>{a.resourceType}</a> : a.resourceType}
              <div class="id">{a.resourceId}</div>
            </td>
            <td data-testid="audit-actor">
              <Actor entry={a} />
            </td>
            <td>
              <code class="changes">{JSON.stringify(a.changes)}</code>
            </td>
          </tr>
        )}
      />
    </Page>
  );
}
