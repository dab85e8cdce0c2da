import { useEffect, useState } from 'preact/hooks';
import {
  archiveRoute,
  createRoute,
  getRoute,
  getRouteHealth,
  idempotencyKey,
  listProviderConnections,
  listRoutes,
  type Client,
  type ProviderConnectionDto,
  type RouteDto,
  type RouteHealthDto,
  type RouteStrategy,
  type RouteTargetDto,
  type UpdateRouteDto,
  updateRoute,
} from '../api.js';
import type { PageProps } from '../main.js';
import {
  Empty,
  ErrorNote,
  Field,
  Form,
  formatNumber,
  ListTable,
  Pager,
  Status,
  useAction,
  usePaged,
  valueOf,
  when,
  Working,
} from '../ui.js';

const STRATEGIES: Record<RouteStrategy, string> = {
  fallback: 'Fallback',
  loadbalance: 'Load balance',
  'least-busy': 'Least busy',
};
const STRATEGY_HINT =
  'Fallback: the targets in order. Load balance: one drawn by weight, then the others in order. Least busy: the one with the fewest calls in flight.';

interface TargetRow {
  providerConnectionId: string;
  weight: string;
  /** "asked=sent" lines. */
  modelMap: string;
  /** The target as the API has it (none for one added in the form): what the form does not edit is sent back as it is. */
  from?: RouteTargetDto;
}

/** A duration the API gives in milliseconds, as read: 600 ms, 20 s, 1.5 s. */
const duration = (ms: number) => (ms < 1000 ? `${formatNumber(ms)} ms` : `${formatNumber(Math.round(ms / 100) / 10)} s`);

/** A target's attempts and timeouts, as read: "2 attempts · timeout 20 s · first byte of a stream within 5 s". */
function targetSettings(t: RouteTargetDto): string {
  const attempts = t.attempts ?? 1;
  return [
    `${attempts} ${attempts === 1 ? 'attempt' : 'attempts'}`,
    t.timeoutMs === undefined ? "the connection's timeout" : `timeout ${duration(t.timeoutMs)}`,
    ...(t.firstTokenTimeoutMs === undefined ? [] : [`first byte of a stream within ${duration(t.firstTokenTimeoutMs)}`]),
  ].join(' · ');
}

/** What differs from the defaults in a target's attempts and timeouts (the routes list shows only that). */
const targetSettingsShort = (t: RouteTargetDto) =>
  (t.attempts ?? 1) > 1 || t.timeoutMs !== undefined || t.firstTokenTimeoutMs !== undefined ? targetSettings(t) : '';

/** The model map as typed, one "asked=sent" a line, as the API's object; the line that is not one is named. */
function modelMapOf(text: string, target: number): Record<string, string> {
  const map: Record<string, string> = {};
  for (const [i, line] of text.split('\n').entries()) {
    if (!line.trim()) continue;
    const at = line.indexOf('=');
    if (at < 1 || !line.slice(at + 1).trim())
      throw new Error(`Target ${target}, model map line ${i + 1}: write it as asked=sent (gpt-4o=my-gpt4o-deployment).`);
    map[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return map;
}

function TargetsEditor(props: {
  targets: TargetRow[];
  connections: ProviderConnectionDto[];
  weighted: boolean;
  onChange: (t: TargetRow[]) => void;
}) {
  const edit = (i: number, field: keyof TargetRow) => (e: Event) =>
    props.onChange(props.targets.map((t, j) => (j === i ? { ...t, [field]: valueOf(e) } : t)));
  return (
    <fieldset>
      <legend>Targets (tried in this order)</legend>
      {props.targets.map((t, i) => (
        <div class="grid" key={i} role="group" aria-label={`Target ${i + 1}`}>
          <Field label="Connection">
            <select required value={t.providerConnectionId} onChange={edit(i, 'providerConnectionId')}>
              <option value="">Choose…</option>
              {props.connections.map((c) => (
                <option key={c.id} value={c.id}>
                  {c.name} ({c.protocolProfile})
                </option>
              ))}
            </select>
          </Field>
          {props.weighted ? (
            <Field label="Weight" hint="Served weight / sum of the time">
              <input type="number" min={1} required value={t.weight} onInput={edit(i, 'weight')} />
            </Field>
          ) : null}
          <Field label="Model map" hint="One asked=sent a line; a model not in it is sent as asked">
            <textarea rows={2} value={t.modelMap} onInput={edit(i, 'modelMap')} />
          </Field>
          <div class="field">
            <span class="label">Attempts and timeouts</span>
            <span data-testid="target-settings">{t.from ? targetSettings(t.from) : "1 attempt · the connection's timeout"}</span>
            <small>{t.from ? 'Set through the API; kept as they are' : "The API's defaults"}</small>
          </div>
          {props.targets.length > 1 ? (
            <button type="button" class="danger" onClick={() => props.onChange(props.targets.filter((_, j) => j !== i))}>
              Remove target {i + 1}
            </button>
          ) : null}
        </div>
      ))}
      <button type="button" onClick={() => props.onChange([...props.targets, { providerConnectionId: '', weight: '1', modelMap: '' }])}>
        Add a target
      </button>
    </fieldset>
  );
}

/** Each target's health as this process sees it: breaker, calls and errors of the last minute and hour, median latency, last error. */
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
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
      {health ? (
        <ListTable
          caption={`Health of ${route.name}'s targets`}
          columns={['Target', 'Connection', 'Breaker', 'Last minute', 'Last hour', 'p50', 'Last error']}
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
              <td class="num">{t.p50LatencyMs === undefined ? '—' : `${formatNumber(Math.round(t.p50LatencyMs * 10) / 10)} ms`}</td>
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
            </tr>
          ))}
        </ListTable>
      ) : null}
    </section>
  );
}

const NEW_TARGET: TargetRow = { providerConnectionId: '', weight: '1', modelMap: '' };

/** A route's targets as the form edits them. */
const rowsOf = (route: RouteDto): TargetRow[] =>
  route.targets.map((t) => ({
    providerConnectionId: t.providerConnectionId,
    weight: String(t.weight ?? 1),
    modelMap: Object.entries(t.modelMap ?? {})
      .map(([asked, sent]) => `${asked}=${sent}`)
      .join('\n'),
    from: t,
  }));

/**
 * A target as the API takes it: what the form edits, over the target as the API had it. A weight is sent where the
 * form shows it (a load-balanced route), else the one the target had.
 */
function targetOf(row: TargetRow, index: number, weighted: boolean): RouteTargetDto {
  const { modelMap: _, weight, ...kept } = row.from ?? { providerConnectionId: row.providerConnectionId };
  const modelMap = modelMapOf(row.modelMap, index + 1);
  return {
    ...kept,
    providerConnectionId: row.providerConnectionId,
    ...(weighted ? { weight: Number(row.weight) } : weight !== undefined ? { weight } : {}),
    ...(Object.keys(modelMap).length ? { modelMap } : {}),
  };
}

/** JSON with each object's keys in order: two values the API would read alike read alike. */
const canonical = (value: unknown) =>
  JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );

/** What the form changed in `route`: only those fields are sent (updateRoute changes the fields given, and no other). */
function changesOf(
  route: RouteDto,
  form: Required<Pick<UpdateRouteDto, 'name' | 'strategy' | 'tryWhenAllOpen' | 'targets'>>,
): UpdateRouteDto {
  return {
    ...(form.name !== route.name ? { name: form.name } : {}),
    ...(form.strategy !== route.strategy ? { strategy: form.strategy } : {}),
    ...(form.tryWhenAllOpen !== route.tryWhenAllOpen ? { tryWhenAllOpen: form.tryWhenAllOpen } : {}),
    ...(canonical(form.targets) !== canonical(route.targets) ? { targets: form.targets } : {}),
  };
}

/** The route's settings the form does not edit (set through the API: `updateRoute`), shown as they are and kept. */
function KeptSettings({ route }: { route: RouteDto }) {
  const { retry, breaker } = route;
  const metadata = Object.keys(route.metadata ?? {}).length ? JSON.stringify(route.metadata) : undefined;
  return (
    <section aria-labelledby="kept-title">
      <h4 id="kept-title">Retries and breaker (set through the API; kept as they are)</h4>
      <dl class="figures">
        <dt>Statuses that move a call on</dt>
        <dd>{route.retryOn.join(', ')}</dd>
        <dt>Retry waits</dt>
        <dd>
          {retry.baseDelayMs === undefined || retry.maxDelayMs === undefined
            ? '—'
            : `from ${duration(retry.baseDelayMs)} up to ${duration(retry.maxDelayMs)}`}
          {retry.retryAfterCapMs === undefined ? '' : ` · a Retry-After over ${duration(retry.retryAfterCapMs)} moves on`}
          {retry.budgetMs === undefined ? '' : ` · at most ${duration(retry.budgetMs)} of waits a call`}
        </dd>
        <dt>Breaker</dt>
        <dd>
          {[
            breaker.consecutiveFailures === undefined
              ? undefined
              : `opens after ${formatNumber(breaker.consecutiveFailures)} failures in a row`,
            breaker.errorRatePercent === undefined
              ? undefined
              : `or ${breaker.errorRatePercent} % errors of at least ${formatNumber(breaker.minimumCalls)} calls in ${duration(breaker.windowMs ?? 0)}`,
            breaker.cooldownMs === undefined ? undefined : `cools down for ${duration(breaker.cooldownMs)}`,
          ]
            .filter(Boolean)
            .join(' · ')}
        </dd>
        {metadata ? (
          <>
            <dt>Metadata</dt>
            <dd>
              <code>{metadata}</code>
            </dd>
          </>
        ) : null}
      </dl>
    </section>
  );
}

export function RoutesPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const list = usePaged((cursor) => listRoutes({ client, path: { workspaceId }, query: { cursor, limit: 20 } }), [workspaceId]);
  const [connections, setConnections] = useState<ProviderConnectionDto[]>([]);
  const [name, setName] = useState('');
  const [strategy, setStrategy] = useState<RouteStrategy>('fallback');
  const [targets, setTargets] = useState<TargetRow[]>([NEW_TARGET]);
  const [tryWhenAllOpen, setTryWhenAllOpen] = useState(false);
  /** The route the form edits (none: the form creates one). */
  const [editing, setEditing] = useState<RouteDto | undefined>();
  const [open, setOpen] = useState<string | undefined>();
  const action = useAction();
  useEffect(() => {
    listProviderConnections({ client, path: { workspaceId }, query: { limit: 100 } }).then(
      (page) => setConnections(page.data),
      () => setConnections([]),
    );
  }, [workspaceId]);
  const names = Object.fromEntries(connections.map((c) => [c.id, c.name]));
  const active = connections.filter((c) => c.status === 'ACTIVE');
  // A route being edited keeps a target whose connection is no longer active (the API says whether it may).
  const choices = connections.filter((c) => c.status === 'ACTIVE' || targets.some((t) => t.providerConnectionId === c.id));

  const reset = () => {
    setEditing(undefined);
    setName('');
    setStrategy('fallback');
    setTargets([NEW_TARGET]);
    setTryWhenAllOpen(false);
  };
  /** The route as the API has it now (the list may be older): the form starts from it, and sends what differs. */
  const edit = async (listed: RouteDto) => {
    const res = await action.run(`Opening ${listed.name}…`, () => getRoute({ client, path: { routeId: listed.id } }));
    if (!res) return;
    const r = res.data;
    setEditing(r);
    setName(r.name);
    setStrategy(r.strategy);
    setTargets(rowsOf(r));
    setTryWhenAllOpen(r.tryWhenAllOpen);
    document.getElementById('route-form')?.scrollIntoView({ block: 'start' });
  };
  /** What the form says, as the API takes it on create (and, what differs from the route, on update). */
  const fields = () => ({
    name: name.trim(),
    strategy,
    tryWhenAllOpen,
    targets: targets.map((t, i) => targetOf(t, i, strategy === 'loadbalance')),
  });
  const save = async () => {
    const res = editing
      ? await action.run('Saving the route…', async () => {
          const changes = changesOf(editing, fields());
          // Nothing changed: nothing is sent, and the route is as it was.
          if (Object.keys(changes).length === 0) return { data: editing };
          return updateRoute({ client, path: { routeId: editing.id }, body: changes });
        })
      : await action.run('Creating the route…', () =>
          createRoute({ client, path: { workspaceId }, body: fields(), headers: { 'Idempotency-Key': idempotencyKey() } }),
        );
    if (res) {
      reset();
      setOpen(res.data.id);
      list.reload();
    }
  };
  const archive = async (r: RouteDto) => {
    if (!window.confirm(`Archive ${r.name}? Calls to its URL are refused from now on, for good.`)) return;
    if (await action.run('Archiving…', () => archiveRoute({ client, path: { routeId: r.id } }))) list.reload();
  };

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Routes</h1>
      <p class="lead">
        A route is one gateway URL over several provider connections: it falls back, retries, balances and opens a breaker on a target that
        keeps failing. It is called exactly as a connection, with the same SDKs and inference keys.
      </p>
      {active.length === 0 ? (
        <Empty>A route's targets are active provider connections: add one on the Provider connections page first.</Empty>
      ) : (
        <Form
          id="route-form"
          title={editing ? `Edit ${editing.name}` : 'Create a route'}
          submit={editing ? 'Save route' : 'Create route'}
          onSubmit={save}
          disabled={!!action.working}
        >
          <div class="grid">
            <Field label="Name">
              <input name="routeName" required value={name} onInput={(e) => setName(valueOf(e))} />
            </Field>
            <Field label="Strategy" hint={STRATEGY_HINT}>
              <select name="strategy" value={strategy} onChange={(e) => setStrategy(valueOf(e) as RouteStrategy)}>
                {Object.entries(STRATEGIES).map(([k, label]) => (
                  <option key={k} value={k}>
                    {label}
                  </option>
                ))}
              </select>
            </Field>
          </div>
          <TargetsEditor targets={targets} connections={choices} weighted={strategy === 'loadbalance'} onChange={setTargets} />
          <label class="check">
            <input
              type="checkbox"
              name="tryWhenAllOpen"
              checked={tryWhenAllOpen}
              onChange={(e) => setTryWhenAllOpen(e.currentTarget.checked)}
            />
            With every breaker open, still try the least recently failed target (else 503 at once)
          </label>
          {editing ? <KeptSettings route={editing} /> : null}
          {editing ? (
            <button type="button" onClick={reset}>
              Cancel editing
            </button>
          ) : null}
        </Form>
      )}
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {list.items?.length === 0 ? (
        <Empty>No route yet. Create one above to give several connections one URL.</Empty>
      ) : (
        <ListTable caption="Routes" columns={['Route', 'Strategy', 'Targets', 'Status', 'Actions']}>
          {list.items?.map((r) => (
            <>
              <tr key={r.id}>
                <td>
                  {r.name}
                  <div>
                    <code>{r.gatewayBaseUrl}</code>
                  </div>
                  <div class="id">{r.id}</div>
                </td>
                <td>{r.strategy}</td>
                <td>
                  {r.targets.map((t, i) => (
                    <div key={i}>
                      {i + 1}. {names[t.providerConnectionId] ?? t.providerConnectionId}
                      {r.strategy === 'loadbalance' ? ` (weight ${t.weight ?? 1})` : ''}
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
                </td>
                <td>
                  <Status value={r.status} />
                </td>
                <td class="actions">
                  <button type="button" aria-expanded={open === r.id} onClick={() => setOpen(open === r.id ? undefined : r.id)}>
                    {open === r.id ? 'Hide health' : `Health of ${r.name}`}
                  </button>
                  {r.status === 'ACTIVE' ? (
                    <>
                      <button type="button" onClick={() => void edit(r)}>
                        Edit {r.name}
                      </button>
                      <button type="button" class="danger" onClick={() => void archive(r)}>
                        Archive
                      </button>
                    </>
                  ) : null}
                </td>
              </tr>
              {open === r.id ? (
                <tr key={`${r.id}-health`}>
                  <td colSpan={5}>
                    <Health client={client} route={r} names={names} />
                  </td>
                </tr>
              ) : null}
            </>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}
