/**
 * The routes page's form: a route's name, strategy, targets (with their attempts and timeouts), retries and breaker,
 * its request log policy, created or edited; what the form does not edit (metadata) is shown and kept.
 */
import { draftOf, policyOf, RequestLogFields } from '../components/request-log-policy.js';
import type {
  ProviderConnectionDto,
  RouteBreakerDto,
  RequestLogPolicy,
  RouteDto,
  RouteRetryDto,
  RouteStrategy,
  RouteTargetDto,
  UpdateRouteDto,
} from '../api.js';
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
  /** Empty: the API's default (1 attempt, the connection's timeout, no first-byte bound). */
  attempts: string;
  timeoutMs: string;
  firstTokenTimeoutMs: string;
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
          <Input
            label="Attempts"
            hint="1 to 5: the first and its retries"
            type="number"
            min={1}
            max={5}
            placeholder="1"
            value={t.attempts}
            onInput={edit(i, 'attempts')}
          />
          <Input
            label="Timeout (ms)"
            hint="For the headers and between bytes; empty: inherited"
            type="number"
            min={100}
            max={600000}
            value={t.timeoutMs}
            onInput={edit(i, 'timeoutMs')}
          />
          <Input
            label="First byte of a stream within (ms)"
            hint="Else the next target; empty: no bound"
            type="number"
            min={100}
            max={600000}
            value={t.firstTokenTimeoutMs}
            onInput={edit(i, 'firstTokenTimeoutMs')}
          />
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

const NEW_TARGET: TargetRow = { providerConnectionId: '', weight: '1', modelMap: '', attempts: '', timeoutMs: '', firstTokenTimeoutMs: '' };

/** The route's retry waits and breaker thresholds the form edits: each field, its label and the API's default. */
const RETRY = [
  ['baseDelayMs', 'First wait (ms)', 200, 0, 60000],
  ['maxDelayMs', 'Longest wait (ms)', 2000, 0, 60000],
  ['retryAfterCapMs', 'A Retry-After over this moves on (ms)', 5000, 0, 60000],
  ['budgetMs', 'All waits of a call, at most (ms)', 10000, 0, 600000],
] as const;
const BREAKER = [
  ['consecutiveFailures', 'Opens after failures in a row', 5, 1, 1000],
  ['errorRatePercent', 'Or at an error rate (%)', 50, 1, 100],
  ['minimumCalls', 'Of at least calls', 20, 1, 100000],
  ['windowMs', 'In a window of (ms)', 60000, 1000, 3600000],
  ['cooldownMs', 'Cools down for (ms)', 30000, 100, 3600000],
] as const;
type RetryField = (typeof RETRY)[number][0];
type BreakerField = (typeof BREAKER)[number][0];
const DEFAULT_RETRY_ON = '429, 500, 502, 503, 504, 529';

const blank = <K extends string>(fields: readonly (readonly [K, ...unknown[]])[]) =>
  Object.fromEntries(fields.map(([f]) => [f, ''])) as Record<K, string>;
const typed = <K extends string>(fields: readonly (readonly [K, ...unknown[]])[], from: Partial<Record<K, number>>) =>
  Object.fromEntries(fields.map(([f]) => [f, from[f] === undefined ? '' : String(from[f])])) as Record<K, string>;

/** A new route, as the form starts: the API's defaults for what is left empty. */
export const NEW_ROUTE = {
  name: '',
  strategy: 'fallback' as RouteStrategy,
  targets: [NEW_TARGET],
  tryWhenAllOpen: false,
  retryOn: '',
  retry: blank(RETRY),
  breaker: blank(BREAKER),
  requestLog: draftOf(null),
};
type RouteForm = typeof NEW_ROUTE;

/** A route as the form edits it. */
export const formOf = (route: RouteDto): RouteForm => ({
  name: route.name,
  strategy: route.strategy,
  tryWhenAllOpen: route.tryWhenAllOpen,
  retryOn: route.retryOn.join(', '),
  retry: typed(RETRY, route.retry),
  breaker: typed(BREAKER, route.breaker),
  requestLog: draftOf(route.requestLog),
  targets: route.targets.map((t) => ({
    providerConnectionId: t.providerConnectionId,
    weight: String(t.weight ?? 1),
    modelMap: Object.entries(t.modelMap ?? {})
      .map(([asked, sent]) => `${asked}=${sent}`)
      .join('\n'),
    attempts: t.attempts === undefined ? '' : String(t.attempts),
    timeoutMs: t.timeoutMs === undefined ? '' : String(t.timeoutMs),
    firstTokenTimeoutMs: t.firstTokenTimeoutMs === undefined ? '' : String(t.firstTokenTimeoutMs),
    from: t,
  })),
});

/** The numbers typed, as the API takes them: those set, and no other. */
function numbersOf<K extends string>(values: Record<K, string>): Partial<Record<K, number>> {
  return Object.fromEntries(
    Object.entries<string>(values)
      .filter(([, v]) => v.trim() !== '')
      .map(([k, v]) => [k, Number(v)]),
  ) as Partial<Record<K, number>>;
}

/** The statuses typed ("429, 503"), as the API's list; one that is not a status is named. */
function statusesOf(text: string): number[] | undefined {
  if (!text.trim()) return undefined;
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((part) => {
      if (!/^\d{3}$/.test(part)) throw new Error(`Statuses that move a call on: ${part} is no HTTP status (write them as 429, 503).`);
      return Number(part);
    });
}

/**
 * A target as the API takes it: what the form edits, over the target as the API had it. A weight is sent where the
 * form shows it (a load-balanced route), else the one the target had.
 */
function targetOf(row: TargetRow, index: number, weighted: boolean): RouteTargetDto {
  const {
    modelMap: _,
    weight,
    attempts: _a,
    timeoutMs: _t,
    firstTokenTimeoutMs: _f,
    ...kept
  } = row.from ?? { providerConnectionId: row.providerConnectionId };
  const modelMap = modelMapOf(row.modelMap, index + 1);
  return {
    ...kept,
    providerConnectionId: row.providerConnectionId,
    ...(weighted ? { weight: Number(row.weight) } : weight !== undefined ? { weight } : {}),
    ...(Object.keys(modelMap).length ? { modelMap } : {}),
    ...numbersOf({ attempts: row.attempts, timeoutMs: row.timeoutMs, firstTokenTimeoutMs: row.firstTokenTimeoutMs }),
  };
}

/** What the form says, as the API takes it on create (and, what differs from the route, on update). */
export const fieldsOf = (form: RouteForm) => {
  const retryOn = statusesOf(form.retryOn);
  const retry: RouteRetryDto = numbersOf(form.retry);
  const breaker: RouteBreakerDto = numbersOf(form.breaker);
  return {
    name: form.name.trim(),
    strategy: form.strategy,
    tryWhenAllOpen: form.tryWhenAllOpen,
    targets: form.targets.map((t, i) => targetOf(t, i, form.strategy === 'loadbalance')),
    ...(retryOn ? { retryOn } : {}),
    ...(Object.keys(retry).length ? { retry } : {}),
    ...(Object.keys(breaker).length ? { breaker } : {}),
  };
};

/** The route's request log policy as the form says it (null: its plan's or workspace's); createRoute does not take it. */
export const requestLogOf = (form: RouteForm): RequestLogPolicy | null => policyOf(form.requestLog);

/** JSON with each object's keys in order: two values the API would read alike read alike. */
const canonical = (value: unknown) =>
  JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );

/** What the form changed in `route`: only those fields are sent (updateRoute changes the fields given, and no other). */
export function changesOf(route: RouteDto, form: ReturnType<typeof fieldsOf>, requestLog: RequestLogPolicy | null): UpdateRouteDto {
  return {
    ...(canonical(requestLog) !== canonical(route.requestLog ?? null) ? { requestLog } : {}),
    ...(form.name !== route.name ? { name: form.name } : {}),
    ...(form.strategy !== route.strategy ? { strategy: form.strategy } : {}),
    ...(form.tryWhenAllOpen !== route.tryWhenAllOpen ? { tryWhenAllOpen: form.tryWhenAllOpen } : {}),
    ...(canonical(form.targets) !== canonical(route.targets) ? { targets: form.targets } : {}),
    ...(form.retryOn && canonical(form.retryOn) !== canonical(route.retryOn) ? { retryOn: form.retryOn } : {}),
    ...(canonical(form.retry ?? {}) !== canonical(route.retry) ? { retry: form.retry ?? {} } : {}),
    ...(canonical(form.breaker ?? {}) !== canonical(route.breaker) ? { breaker: form.breaker ?? {} } : {}),
  };
}

/** The route's retries and breaker: each field, empty for the API's default (its placeholder). */
function RetryAndBreaker({ form }: { form: Fields<RouteForm> }) {
  const { retry, breaker } = form.values;
  const numbers = <K extends RetryField | BreakerField>(
    fields: readonly (readonly [K, string, number, number, number])[],
    values: Record<K, string>,
    put: (v: Record<K, string>) => void,
  ) =>
    fields.map(([field, label, byDefault, min, max]) => (
      <Input
        key={field}
        label={label}
        name={field}
        type="number"
        min={min}
        max={max}
        placeholder={String(byDefault)}
        value={values[field]}
        onInput={(e) => put({ ...values, [field]: valueOf(e) })}
      />
    ));
  return (
    <fieldset>
      <legend>Retries and breaker (empty: the default shown)</legend>
      <Input
        label="Statuses that move a call on"
        hint="Upstream statuses, comma-separated"
        name="retryOn"
        placeholder={DEFAULT_RETRY_ON}
        {...form.bind('retryOn')}
      />
      <div class="grid" role="group" aria-label="Retry waits">
        {numbers(RETRY, retry, (v) => form.put({ retry: v }))}
      </div>
      <div class="grid" role="group" aria-label="Breaker thresholds">
        {numbers(BREAKER, breaker, (v) => form.put({ breaker: v }))}
      </div>
    </fieldset>
  );
}

/** The route's metadata, which the form does not edit (set through the API: `updateRoute`), shown as it is and kept. */
function KeptSettings({ route }: { route: RouteDto }) {
  const metadata = Object.keys(route.metadata ?? {}).length ? JSON.stringify(route.metadata) : undefined;
  if (!metadata) return null;
  return (
    <section aria-labelledby="kept-title">
      <h4 id="kept-title">Metadata (set through the API; kept as it is)</h4>
      <code>{metadata}</code>
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
      <RetryAndBreaker form={form} />
      <RequestLogFields
        name="route"
        inherit="The plan’s or workspace’s policy"
        value={form.values.requestLog}
        onChange={(requestLog) => form.put({ requestLog })}
      />
      {editing ? <KeptSettings route={editing} /> : null}
      {editing ? (
        <button type="button" onClick={props.onCancel}>
          Cancel editing
        </button>
      ) : null}
    </>
  );
}
