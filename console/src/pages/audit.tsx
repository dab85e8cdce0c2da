import { listAuditLogs, type AuditLogDto } from '../api.js';
import { PagedTable } from '../components/lists.js';
import { rangeOf, when } from '../format.js';
import { onlySet, useFields, usePaged } from '../hooks.js';
import { ErrorNote, Input, LocalTimeInput, Page, Toolbar, Working, type PageProps } from '../ui.js';

const NO_FILTERS = { actor: '', action: '', resourceType: '', resourceId: '', since: '', until: '' };

/** The actor filter's query: a person by their email, else a credential by its id (a key's, `root`, `session:<id>`). */
function actorQuery(actor: string): { actorEmail?: string; actorKeyId?: string } {
  const value = actor.trim();
  if (!value) return {};
  return value.includes('@') ? { actorEmail: value } : { actorKeyId: value };
}

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

/**
 * Who made the change: the person (their name, their email under it) or the key's name, with the role used and the
 * credential's id; the root key of NEXUS_MANAGEMENT_KEY and Nexus's own work by what they are.
 */
function Actor({ entry }: { entry: AuditLogDto }) {
  const name = entry.actorName ?? (entry.actorKeyId === 'root' ? 'root key (NEXUS_MANAGEMENT_KEY)' : undefined);
  const email = entry.actorEmail && entry.actorEmail !== name ? entry.actorEmail : undefined;
  return (
    <>
      {name ?? null}
      {email ? <div>{email}</div> : null}
      {entry.actorRole ? <div class="role">as {entry.actorRole}</div> : null}
      <div class="id">{entry.actorKeyId}</div>
    </>
  );
}

export function AuditPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const filters = useFields(NO_FILTERS);
  const { actor, action, resourceType, resourceId, since, until } = filters.values;
  const filtered = Object.values(filters.values).some(Boolean);
  const query = { ...actorQuery(actor), ...onlySet({ action, resourceType, resourceId }), ...rangeOf(since, until) };
  const list = usePaged(
    (page) => listAuditLogs({ client, path: { workspaceId }, query: { ...page, ...query } }),
    [workspaceId, filters.values],
  );
  return (
    <Page
      title="Audit log"
      lead="Every change made through the Admin API, newest first, with who made it: the person signed in (and the role they acted with), or the key (by the name it has now on the Management keys page)."
    >
      <Toolbar class="toolbar filters" label="Filters">
        <Input label="Actor" name="actor" placeholder="ada@acme.example or a key id" {...filters.bindChange('actor')} />
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
        columns={['When', 'Action', 'Resource', 'Actor', 'Changes']}
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
