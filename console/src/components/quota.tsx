/** An access's quota as the users page shows it: a cell of a user's row with its state, and the bar of its period. */
import { useState } from 'preact/hooks';
import { getWorkspaceAccessQuota, type Client, type QuotaSnapshotDto } from '../api.js';
import { formatNumber, when } from '../format.js';
import { useAction, useRead } from '../hooks.js';
import { ErrorNote, Figures } from '../ui.js';

/**
 * Where an access stands: `used up` when nothing is left; `blocked` when its latest call was refused for quota (since
 * the period's last top-up), or what is available is below its typical call (the median units of its last 20
 * charged calls: its next call of that size is refused); `near limit` from 80 % of the grant consumed; else none.
 */
function quotaState(q: QuotaSnapshotDto): 'blocked' | 'used up' | 'near limit' | undefined {
  const available = BigInt(q.availableUnits);
  const granted = BigInt(q.grantedUnits);
  if (granted === 0n || available === 0n) return 'used up';
  if (q.quotaRefusedAt || (q.typicalCallUnits !== undefined && available < BigInt(q.typicalCallUnits))) return 'blocked';
  return BigInt(q.consumedUnits) * 10n >= granted * 8n ? 'near limit' : undefined;
}

/** Why an access is blocked, in a sentence. */
function blockedBecause(q: QuotaSnapshotDto): string {
  if (q.quotaRefusedAt)
    return `Its latest call, at ${when(q.quotaRefusedAt)}, was refused for quota: ${formatNumber(q.availableUnits)} units left were less than it could need.`;
  return `${formatNumber(q.availableUnits)} units left, below its typical call of ${formatNumber(q.typicalCallUnits)} (the median of its last 20 calls): its next such call is refused.`;
}

function StateBadge({ quota }: { quota: QuotaSnapshotDto }) {
  const state = quotaState(quota);
  if (!state) return null;
  const title = state === 'blocked' ? blockedBecause(quota) : undefined;
  return (
    <span class={state === 'near limit' ? 'badge' : 'badge over'} title={title}>
      {state}
    </span>
  );
}

/** Consumed of granted units this period, with the access's state (quotaState) as a badge. */
export function QuotaCell({ client, accessId }: { client: Client; accessId: string }) {
  const [quota, setQuota] = useState<QuotaSnapshotDto | null | undefined>();
  useRead(
    () =>
      getWorkspaceAccessQuota({ client, path: { accessId } }).then(
        (res) => res.data,
        () => null,
      ),
    setQuota,
    [accessId],
  );
  if (quota === undefined) return <span class="id">…</span>;
  if (quota === null) return <span class="id">—</span>;
  return (
    <span class="numbers" data-testid="quota-cell">
      {formatNumber(quota.consumedUnits)} / {formatNumber(quota.grantedUnits)}
      <StateBadge quota={quota} />
    </span>
  );
}

/** The quota's figures in units: each term and its field. */
const UNITS = [
  ['Granted', 'grantedUnits'],
  ['Consumed', 'consumedUnits'],
  ['Reserved', 'reservedUnits'],
  ['Available', 'availableUnits'],
] as const;

/** How the period's grant came to be: a plan change's pro-rated share, the use carried from before it, the top-ups. */
function GrantExplained({ quota }: { quota: QuotaSnapshotDto }) {
  const topUps = BigInt(quota.toppedUpUnits ?? '0');
  const p = quota.proration;
  const plus = topUps > 0n ? <>, plus {formatNumber(quota.toppedUpUnits)} granted once (top-ups)</> : null;
  if (!p) {
    return topUps > 0n ? (
      <p data-testid="grant-explained">
        {formatNumber(BigInt(quota.grantedUnits) - topUps)} units from the plan{plus}.
      </p>
    ) : null;
  }
  const cycleMs = new Date(quota.periodEnd).getTime() - new Date(p.cycleStart).getTime();
  const partMs = new Date(quota.periodEnd).getTime() - new Date(quota.periodStart ?? p.cycleStart).getTime();
  const percent = cycleMs > 0 ? ((partMs / cycleMs) * 100).toFixed(1) : '100';
  return (
    <p data-testid="grant-explained">
      Pro-rated: this period began with a plan change on {when(quota.periodStart)}. The plan gives {formatNumber(p.planQuotaUnits)} units a
      cycle ({when(p.cycleStart)} to {when(quota.periodEnd)}); the {percent} % of the cycle left gets {formatNumber(p.shareUnits)} of them
      {BigInt(p.carriedUnits) > 0n ? (
        <>, less {formatNumber(p.carriedUnits)} used before the change beyond the previous plan&apos;s share</>
      ) : null}
      {plus}: {formatNumber(quota.grantedUnits)} granted.
    </p>
  );
}

/** Granted, consumed, reserved and available units of the access's current period, as a bar, and how it was granted. */
export function QuotaBar({ client, accessId }: { client: Client; accessId: string }) {
  const [quota, setQuota] = useState<QuotaSnapshotDto | undefined>();
  const action = useAction();
  useRead(async () => (await getWorkspaceAccessQuota({ client, path: { accessId } })).data, setQuota, [accessId], {
    action,
    label: 'Reading the quota…',
  });
  if (!quota) return <ErrorNote problem={action.problem} />;
  const granted = Number(quota.grantedUnits) || 1;
  const pct = (v: string) => `${Math.min(100, (Number(v) / granted) * 100).toFixed(2)}%`;
  const typical = quota.typicalCallUnits;
  return (
    <div class="quota" aria-label="Quota">
      <div
        class="bar"
        role="img"
        aria-label={`${quota.consumedUnits} consumed and ${quota.reservedUnits} reserved of ${quota.grantedUnits} units`}
      >
        <span class="consumed" style={{ width: pct(quota.consumedUnits) }} />
        <span class="reserved" style={{ width: pct(quota.reservedUnits) }} />
      </div>
      <Figures
        items={[
          ...UNITS.map(([term, field]) => [term, formatNumber(quota[field])] as const),
          ['Typical call', typical ? `${formatNumber(typical)} (median of its last calls, up to 20)` : '—'],
          ['Resets', when(quota.periodEnd)],
        ]}
      />
      <GrantExplained quota={quota} />
      {quotaState(quota) === 'blocked' ? (
        <p class="error" role="note">
          Blocked: {blockedBecause(quota)} Grant units or change the plan to let them call again.
        </p>
      ) : null}
    </div>
  );
}
