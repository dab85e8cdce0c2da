import { useEffect, useState } from 'preact/hooks';
import { exportInvocations, listInvocations, type Client, type InvocationDto } from '../api.js';
import { PagedTable } from '../components/lists.js';
import { saveFile, stamp } from '../download.js';
import { formatMoney, formatNumber, localValue, moneyDecimals, rangeOf, when } from '../format.js';
import { PRESETS, resolveRange, type Preset } from '../ranges.js';
import { onlySet, useAction, useFields, usePaged, valueOf } from '../hooks.js';
import { namesOf, useConnections } from '../lookups.js';
import { ErrorNote, Field, Input, Page, Select, statusChoices, Toolbar, Working, type PageProps } from '../ui.js';
import { InvocationDetail, ms, StatusWithReason, tokens } from './invocation-detail.js';

type InvocationStatus = 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'FAILED' | 'CLIENT_ABORTED' | 'REJECTED';

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

const NO_FILTERS = { q: '', status: '' as InvocationStatus | '', model: '', workspaceAccessId: '', since: '', until: '' };
type Filters = typeof NO_FILTERS;
/** The ranges that fill Since and Until: in the operator's time zone (custom dates are those two inputs themselves). */
const CALENDAR: Preset[] = ['today', 'week', 'month', 'lastMonth', '24h', '7d', '30d'];
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
  const { q, status, model, workspaceAccessId, since, until } = filters;
  return { ...onlySet({ q: q.trim(), status, model, workspaceAccessId }), ...rangeOf(since, until) };
}

/** The current filter's invocations as a CSV file, saved by the browser (the export needs the key: fetched, then saved). */
function ExportButton({ client, workspaceId, filters }: { client: Client; workspaceId: string; filters: Filters }) {
  const action = useAction();
  const save = async () => {
    const csv = await action.run('Exporting…', async () => {
      const res = await exportInvocations({ client, path: { workspaceId }, query: queryOf(filters), parseAs: 'text' });
      return res.data;
    });
    if (csv !== undefined) saveFile(csv, `invocations-${stamp()}.csv`);
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
  const currency = workspace.currency ?? 'USD';
  const { values: filters, bindChange, put, replace } = useFields<Filters>(() => filtersOf(rest, query));
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
    replace(asked);
    setSearch(asked.q);
  }, [query]);
  const connections = namesOf(useConnections(client, workspaceId));
  const list = usePaged(
    (page) => listInvocations({ client, path: { workspaceId }, query: { ...page, ...queryOf(filters) } }),
    [workspaceId, filters],
  );
  const filtered = Object.values(filters).some(Boolean);
  // The page's costs with as many decimals as the most precise of them needs, so the column lines up.
  const costDecimals = moneyDecimals(
    (list.items ?? []).map((i) => i.costMicros),
    currency,
  );
  const clear = () => {
    setSearch('');
    replace(NO_FILTERS);
  };
  return (
    <Page title="Invocations" lead="One row per gateway call, newest first, refused calls included.">
      <Toolbar class="toolbar search" search label="Find a call" onSubmit={() => put({ q: search })}>
        <Field label="Find" hint="A request id, an invocation id, or a user's email or external id">
          <input name="q" type="search" value={search} onInput={(e) => setSearch(valueOf(e))} />
        </Field>
        <button type="submit">Search</button>
      </Toolbar>
      <Toolbar class="toolbar filters" label="Filters">
        <Select label="Status" name="status" choices={statusChoices(STATUSES, 'Any')} {...bindChange('status')} />
        <Input label="Model (begins with)" name="model" {...bindChange('model')} />
        <Input label="Access id" name="workspaceAccessId" {...bindChange('workspaceAccessId')} />
        <Select
          label="Range"
          name="range"
          choices={{ '': 'Choose…', ...Object.fromEntries(CALENDAR.map((p) => [p, PRESETS[p]])) }}
          value=""
          onChange={(e) => {
            const range = resolveRange({ preset: valueOf(e) as Preset, from: '', to: '' });
            if (range) put({ since: localValue(range.since), until: localValue(range.until) });
          }}
        />
        <Input label="Since" name="since" type="datetime-local" {...bindChange('since')} />
        <Input label="Until" name="until" type="datetime-local" {...bindChange('until')} />
        <button type="button" onClick={list.reload}>
          Refresh
        </button>
        {filtered ? (
          <button type="button" onClick={clear}>
            Clear filters
          </button>
        ) : null}
        <ExportButton client={client} workspaceId={workspaceId} filters={filters} />
      </Toolbar>
      <Working label={list.loading ? 'Loading invocations…' : undefined} keepSpace />
      <ErrorNote problem={list.problem} />
      {open ? (
        <InvocationDetail
          client={client}
          workspaceId={workspaceId}
          currency={currency}
          id={open}
          connections={connections}
          onClose={() => (window.location.hash = base + suffix)}
        />
      ) : null}
      <PagedTable
        list={list}
        caption="Invocations"
        columns={['Time', 'Call', 'User', 'Model', 'Endpoint', 'Status', 'Tokens', 'Units', 'Cost', 'Latency']}
        empty={
          filtered ? (
            <>
              No invocation matches these filters.{' '}
              <button type="button" onClick={clear}>
                Clear the filters
              </button>
            </>
          ) : (
            "No invocation yet. Calls appear here once a user calls the gateway with an inference key (a connection's gateway base URL)."
          )
        }
        row={(i) => (
          <tr aria-current={open === i.id ? 'true' : undefined}>
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
            <td class="num">{i.costMicros === undefined ? '—' : formatMoney(i.costMicros, currency, costDecimals)}</td>
            <td class="num">{ms(i.totalLatencyMs)}</td>
          </tr>
        )}
      />
    </Page>
  );
}
