/**
 * A connection's health in its row (getProviderConnectionHealth): its status as a badge, red when failing (a failed
 * Verify, or half its recent attempts erred), and the last 5 minutes' attempts, error rate and p95; the three
 * windows' figures in full when opened.
 */
import { useState } from 'preact/hooks';
import { getProviderConnectionHealth, type Client, type ConnectionHealthWindowDto, type ProviderConnectionHealthDto } from '../api.js';
import { formatNumber } from '../format.js';
import { useAction, useRead } from '../hooks.js';
import { ErrorNote } from '../ui.js';

const WINDOW_NAMES: Record<ConnectionHealthWindowDto['window'], string> = { '5m': 'Last 5 minutes', '1h': 'Last hour', '1d': 'Last day' };

const percent = (rate: number | undefined) =>
  rate === undefined ? '—' : `${(rate * 100).toLocaleString(undefined, { maximumFractionDigits: 1 })} %`;
const millis = (ms: number | undefined) => (ms === undefined ? '—' : `${ms.toLocaleString(undefined, { maximumFractionDigits: 0 })} ms`);

/** The status badge and a line of the last 5 minutes; `version` changes when the connection was verified again. */
export function HealthCell({ client, connectionId, version }: { client: Client; connectionId: string; version: string }) {
  const [health, setHealth] = useState<ProviderConnectionHealthDto | undefined>();
  const [open, setOpen] = useState(false);
  const load = useAction();
  useRead(
    async () => (await getProviderConnectionHealth({ client, path: { providerConnectionId: connectionId } })).data,
    setHealth,
    [connectionId, version],
    {
      action: load,
      label: 'Reading its health…',
    },
  );
  if (load.problem) return <ErrorNote problem={load.problem} />;
  if (!health) return <span class="id">…</span>;
  const recent = health.windows[0]!;
  return (
    <div data-testid="connection-health">
      <span class={`status status-${health.status}`}>{health.status}</span>
      <div class="id">
        {recent.attempts > 0
          ? `5 min: ${formatNumber(recent.attempts)} calls, ${percent(recent.errorRate)} errors, p95 ${millis(recent.latencyMs?.p95)}`
          : '5 min: no calls'}
      </div>
      {health.verify && health.verify.outcome !== 'reachable' ? <div class="id">Verify failed: {health.verify.outcome}</div> : null}
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)}>
        Health details
      </button>
      {open ? <HealthTable windows={health.windows} /> : null}
    </div>
  );
}

/**
 * The three windows: attempts, errors, error rate, latency and time to first token percentiles (a connection's, or a
 * route target's through its route).
 */
export function HealthTable({
  windows,
  caption = 'Calls that reached the provider, direct and through routes',
  label = 'Health over time',
  testId = 'connection-health-table',
}: {
  windows: ConnectionHealthWindowDto[];
  caption?: string;
  label?: string;
  testId?: string;
}) {
  const columns = ['Window', 'Calls', 'Errors', 'Error rate', 'p50', 'p95', 'p99', 'TTFT p50', 'TTFT p95', 'TTFT p99'];
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label={label}>
      <table data-testid={testId}>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {columns.map((c, i) => (
              <th key={c} scope="col" class={i ? 'num' : undefined}>
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {windows.map((w) => (
            <tr key={w.window}>
              <th scope="row">{WINDOW_NAMES[w.window]}</th>
              <td class="num">{formatNumber(w.attempts)}</td>
              <td class="num">{formatNumber(w.errors)}</td>
              <td class="num">{percent(w.errorRate)}</td>
              <td class="num">{millis(w.latencyMs?.p50)}</td>
              <td class="num">{millis(w.latencyMs?.p95)}</td>
              <td class="num">{millis(w.latencyMs?.p99)}</td>
              <td class="num">{millis(w.timeToFirstTokenMs?.p50)}</td>
              <td class="num">{millis(w.timeToFirstTokenMs?.p95)}</td>
              <td class="num">{millis(w.timeToFirstTokenMs?.p99)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
