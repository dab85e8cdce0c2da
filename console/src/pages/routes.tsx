import { useEffect, useState } from 'preact/hooks';
import {
  archiveRoute,
  createRoute,
  getRoute,
  getRouteHealth,
  idempotent,
  listRoutes,
  updateRoute,
  type Client,
  type RouteDto,
  type RouteHealthDto,
  type RouteTargetDto,
} from '../api.js';
import { ActionButton, ArchiveButton, ExpandButton, useOpenRow } from '../components/buttons.js';
import { ListTable, PagedTable } from '../components/lists.js';
import { formatNumber, when } from '../format.js';
import { useAction, useFields, usePaged } from '../hooks.js';
import { namesOf, useConnections } from '../lookups.js';
import { HealthCell, HealthTable } from '../components/connection-health.js';
import { ActionNotes, Empty, Form, Page, Status, type PageProps } from '../ui.js';
import { changesOf, fieldsOf, formOf, NEW_ROUTE, requestLogOf, RouteFields, targetSettings } from './route-form.js';

/** Latency percentiles in milliseconds, as p50 / p95 / p99 ('—' without attempts). */
const percentiles = (ms: { p50: number; p95: number; p99: number } | undefined) =>
  ms ? [ms.p50, ms.p95, ms.p99].map((v) => formatNumber(Math.round(v))).join(' / ') + ' ms' : '—';

/** What differs from the defaults in a target's attempts and timeouts (the routes list shows only that). */
const targetSettingsShort = (t: RouteTargetDto) =>
  (t.attempts ?? 1) > 1 || t.timeoutMs !== undefined || t.firstTokenTimeoutMs !== undefined ? targetSettings(t) : '';

/**
 * Each target's health: its breaker, the route's attempts on it (calls and errors of the last minute and hour, the last
 * hour's latency percentiles, last error; then 5 minutes, an hour and a day in full), and its connection's health over
 * every call that reached it, direct or through any route.
 */
function Health({ client, route, names }: { client: Client; route: RouteDto; names: Record<string, string> }) {
  const [health, setHealth] = useState<RouteHealthDto | undefined>();
  const action = useAction();
  const read = () =>
    void action.run('Reading the health…', async () => setHealth((await getRouteHealth({ client, path: { routeId: route.id } })).data));
  useEffect(read, [route.id]);
  const rate = (errors: number, calls: number) => (calls ? ` (${Math.round((errors / calls) * 100)} %)` : '');
  return (
    <section class="bindings" aria-label={`Health of ${route.name}`}>
      <h3>Health of {route.name}</h3>
      <div class="toolbar">
        <button type="button" onClick={read} disabled={!!action.working}>
          Refresh
        </button>
        {health ? <span class="id">Checked {when(health.checkedAt)}</span> : null}
      </div>
      <ActionNotes action={action} />
      {health ? (
        <ListTable
          caption={`Health of ${route.name}'s targets`}
          columns={[
            'Target',
            'Connection',
            'Breaker',
            'Last minute',
            'Last hour',
            'Hour p50 / p95 / p99',
            'Last error',
            'Its connection, every call',
          ]}
        >
          {health.targets.map((t) => (
            <tr key={t.providerConnectionId}>
              <td>
                {names[t.providerConnectionId] ?? t.providerConnectionId}
                <div class="id">{t.providerConnectionId}</div>
              </td>
              <td>
                <Status value={t.connectionStatus} />
              </td>
              <td>
                <Status value={t.breakerState} />
                {t.retryAt ? <div class="id">retried from {when(t.retryAt)}</div> : null}
              </td>
              <td class="numbers">
                {formatNumber(t.callsLastMinute)} calls, {formatNumber(t.errorsLastMinute)} errors
                {rate(t.errorsLastMinute, t.callsLastMinute)}
              </td>
              <td class="numbers">
                {formatNumber(t.callsLastHour)} calls, {formatNumber(t.errorsLastHour)} errors{rate(t.errorsLastHour, t.callsLastHour)}
              </td>
              <td class="num">{percentiles(t.windows[1]?.latencyMs)}</td>
              <td>
                {t.lastError ? (
                  <>
                    <code>{t.lastError}</code>
                    <div class="id">{when(t.lastErrorAt)}</div>
                  </>
                ) : (
                  'none'
                )}
              </td>
              <td>
                {/* The target's connection over every call that reached it, direct and through any route. */}
                <HealthCell client={client} connectionId={t.providerConnectionId} version={health.checkedAt} />
              </td>
            </tr>
          ))}
        </ListTable>
      ) : null}
      {health?.targets.map((t) => (
        <HealthTable
          key={t.providerConnectionId}
          windows={t.windows}
          caption={`${names[t.providerConnectionId] ?? t.providerConnectionId} through ${route.name}: its attempts over time`}
          label={`Health of ${names[t.providerConnectionId] ?? t.providerConnectionId} through ${route.name}`}
          testId="route-target-health-table"
        />
      ))}
    </section>
  );
}

/** A route's targets in the list: each connection by name, its weight where it is weighed, its settings and model map. */
function Targets({ route, names }: { route: RouteDto; names: Record<string, string> }) {
  return (
    <>
      {route.targets.map((t, i) => (
        <div key={i}>
          {i + 1}. {names[t.providerConnectionId] ?? t.providerConnectionId}
          {route.strategy === 'loadbalance' ? ` (weight ${t.weight ?? 1})` : ''}
          {targetSettingsShort(t) ? <div class="id">{targetSettingsShort(t)}</div> : null}
          {t.modelMap && Object.keys(t.modelMap).length ? (
            <div class="id">
              {Object.entries(t.modelMap)
                .map(([asked, sent]) => `${asked} → ${sent}`)
                .join(', ')}
            </div>
          ) : null}
        </div>
      ))}
    </>
  );
}

export function RoutesPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const list = usePaged((page) => listRoutes({ client, path: { workspaceId }, query: page }), [workspaceId]);
  const connections = useConnections(client, workspaceId) ?? [];
  const form = useFields(NEW_ROUTE);
  /** The route the form edits (none: the form creates one). */
  const [editing, setEditing] = useState<RouteDto | undefined>();
  const rows = useOpenRow();
  const action = useAction();
  const names = namesOf(connections);

  const reset = () => {
    setEditing(undefined);
    form.reset();
  };
  /** The route as the API has it now (the list may be older): the form starts from it, and sends what differs. */
  const edit = (r: RouteDto) => {
    setEditing(r);
    form.replace(formOf(r));
  };
  // The form is opened by the edit: scrolled to once it is there.
  useEffect(() => {
    if (editing) document.getElementById('route-form')?.scrollIntoView({ block: 'start' });
  }, [editing]);
  const save = async () => {
    const res = editing
      ? await action.run('Saving the route…', async () => {
          const changes = changesOf(editing, fieldsOf(form.values), requestLogOf(form.values));
          // Nothing changed: nothing is sent, and the route is as it was.
          if (Object.keys(changes).length === 0) return { data: editing };
          return updateRoute({ client, path: { routeId: editing.id }, body: changes });
        })
      : await action.run('Creating the route…', async () => {
          const requestLog = requestLogOf(form.values);
          const created = await createRoute({ client, path: { workspaceId }, body: fieldsOf(form.values), headers: idempotent() });
          // createRoute takes no request log policy: a route made with one has it set at once after.
          return requestLog ? updateRoute({ client, path: { routeId: created.data.id }, body: { requestLog } }) : created;
        });
    if (res) {
      reset();
      rows.set(res.data.id);
      list.reload();
    }
  };

  return (
    <Page
      title="Routes"
      lead="A route is one gateway URL over several provider connections: it falls back, retries, balances and opens a breaker on a target that keeps failing. It is called exactly as a connection, with the same SDKs and inference keys."
    >
      {!connections.some((c) => c.status === 'ACTIVE') ? (
        <Empty>A route's targets are active provider connections: add one on the Provider connections page first.</Empty>
      ) : (
        // Editing a route opens the form (its own fold, so that saving or cancelling folds it again).
        <Form
          key={editing?.id ?? 'new'}
          fold={editing ? `Editing ${editing.name}` : 'New route'}
          open={!!editing}
          operation={editing ? 'updateRoute' : 'createRoute'}
          id="route-form"
          title={editing ? `Edit ${editing.name}` : 'Create a route'}
          submit={editing ? 'Save route' : 'Create route'}
          onSubmit={save}
          disabled={!!action.working}
        >
          <RouteFields form={form} connections={connections} editing={editing} onCancel={reset} />
        </Form>
      )}
      <ActionNotes action={action} problem={list.problem} />
      <PagedTable
        list={list}
        caption="Routes"
        columns={['Route', 'Strategy', 'Targets', 'Status', 'Actions']}
        empty="No route yet. Create one with New route above to give several connections one URL."
        row={(r) => (
          <tr>
            <td>
              {r.name}
              <div>
                <code>{r.gatewayBaseUrl}</code>
              </div>
              <div class="id">{r.id}</div>
            </td>
            <td>{r.strategy}</td>
            <td>
              <Targets route={r} names={names} />
            </td>
            <td>
              <Status value={r.status} />
            </td>
            <td class="actions">
              <ExpandButton rows={rows} id={r.id} show={`Health of ${r.name}`} hide="Hide health" />
              {r.status === 'ACTIVE' ? (
                <>
                  <ActionButton
                    operation="updateRoute"
                    action={action}
                    label={`Opening ${r.name}…`}
                    call={() => getRoute({ client, path: { routeId: r.id } })}
                    onDone={(res) => edit(res.data)}
                  >
                    Edit {r.name}
                  </ActionButton>
                  <ArchiveButton
                    operation="archiveRoute"
                    action={action}
                    name={r.name}
                    stops="Calls to its URL are refused from now on, for good."
                    call={() => archiveRoute({ client, path: { routeId: r.id } })}
                    onDone={list.reload}
                  />
                </>
              ) : null}
            </td>
          </tr>
        )}
        detail={(r) => (rows.is(r.id) ? <Health client={client} route={r} names={names} /> : null)}
      />
    </Page>
  );
}
