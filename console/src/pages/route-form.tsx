/** The routes page's form: a route's name, strategy and targets, created or edited; what the form does not edit is shown and kept. */
import type { ProviderConnectionDto, RouteDto, RouteStrategy, RouteTargetDto, UpdateRouteDto } from '../api.js';
import { formatNumber } from '../format.js';
import { valueOf, type Fields } from '../hooks.js';
import { Field, Input, Select } from '../ui.js';

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
export function targetSettings(t: RouteTargetDto): string {
  const attempts = t.attempts ?? 1;
  return [
    `${attempts} ${attempts === 1 ? 'attempt' : 'attempts'}`,
    t.timeoutMs === undefined ? "the connection's timeout" : `timeout ${duration(t.timeoutMs)}`,
    ...(t.firstTokenTimeoutMs === undefined ? [] : [`first byte of a stream within ${duration(t.firstTokenTimeoutMs)}`]),
  ].join(' · ');
}

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
          <Select
            label="Connection"
            required
            choices={{ '': 'Choose…', ...Object.fromEntries(props.connections.map((c) => [c.id, `${c.name} (${c.protocolProfile})`])) }}
            value={t.providerConnectionId}
            onChange={edit(i, 'providerConnectionId')}
          />
          {props.weighted ? (
            <Input
              label="Weight"
              hint="Served weight / sum of the time"
              type="number"
              min={1}
              required
              value={t.weight}
              onInput={edit(i, 'weight')}
            />
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
      <button type="button" onClick={() => props.onChange([...props.targets, NEW_TARGET])}>
        Add a target
      </button>
    </fieldset>
  );
}

const NEW_TARGET: TargetRow = { providerConnectionId: '', weight: '1', modelMap: '' };

/** A new route, as the form starts. */
export const NEW_ROUTE = { name: '', strategy: 'fallback' as RouteStrategy, targets: [NEW_TARGET], tryWhenAllOpen: false };
type RouteForm = typeof NEW_ROUTE;

/** A route as the form edits it. */
export const formOf = (route: RouteDto): RouteForm => ({
  name: route.name,
  strategy: route.strategy,
  tryWhenAllOpen: route.tryWhenAllOpen,
  targets: route.targets.map((t) => ({
    providerConnectionId: t.providerConnectionId,
    weight: String(t.weight ?? 1),
    modelMap: Object.entries(t.modelMap ?? {})
      .map(([asked, sent]) => `${asked}=${sent}`)
      .join('\n'),
    from: t,
  })),
});

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

/** What the form says, as the API takes it on create (and, what differs from the route, on update). */
export const fieldsOf = (form: RouteForm) => ({
  name: form.name.trim(),
  strategy: form.strategy,
  tryWhenAllOpen: form.tryWhenAllOpen,
  targets: form.targets.map((t, i) => targetOf(t, i, form.strategy === 'loadbalance')),
});

/** JSON with each object's keys in order: two values the API would read alike read alike. */
const canonical = (value: unknown) =>
  JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );

/** What the form changed in `route`: only those fields are sent (updateRoute changes the fields given, and no other). */
export function changesOf(route: RouteDto, form: ReturnType<typeof fieldsOf>): UpdateRouteDto {
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

/**
 * The form's fields: name, strategy, targets (over `connections`), what to do with every breaker open; editing a
 * route, its settings the form keeps, and a way back to creating one.
 */
export function RouteFields(props: {
  form: Fields<RouteForm>;
  connections: ProviderConnectionDto[];
  editing: RouteDto | undefined;
  onCancel: () => void;
}) {
  const { form, editing } = props;
  const { strategy, targets, tryWhenAllOpen } = form.values;
  // A route being edited keeps a target whose connection is no longer active (the API says whether it may).
  const choices = props.connections.filter((c) => c.status === 'ACTIVE' || targets.some((t) => t.providerConnectionId === c.id));
  return (
    <>
      <div class="grid">
        <Input label="Name" name="routeName" required {...form.bind('name')} />
        <Select label="Strategy" hint={STRATEGY_HINT} name="strategy" choices={STRATEGIES} {...form.bindChange('strategy')} />
      </div>
      <TargetsEditor
        targets={targets}
        connections={choices}
        weighted={strategy === 'loadbalance'}
        onChange={(t) => form.put({ targets: t })}
      />
      <label class="check">
        <input
          type="checkbox"
          name="tryWhenAllOpen"
          checked={tryWhenAllOpen}
          onChange={(e) => form.put({ tryWhenAllOpen: e.currentTarget.checked })}
        />
        With every breaker open, still try the least recently failed target (else 503 at once)
      </label>
      {editing ? <KeptSettings route={editing} /> : null}
      {editing ? (
        <button type="button" onClick={props.onCancel}>
          Cancel editing
        </button>
      ) : null}
    </>
  );
}
