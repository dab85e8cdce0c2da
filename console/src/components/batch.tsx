/**
 * A batch's invocation (docs/batches.md), as the call page shows it: the provider's batch and its last status, its
 * requests (those charged of those in its input file), the bound it was admitted at, the units charged and the rest
 * released, and its cost at the batch price. Each request is a usage event of its own; the batch's invocation has none.
 */
import type { InvocationBatchDto } from '../api.js';
import { formatMoney, formatNumber, when } from '../format.js';
import { Figures } from '../ui.js';

export function BatchFigures({ batch, currency }: { batch: InvocationBatchDto; currency: string }) {
  const released = BigInt(batch.boundUnits) - BigInt(batch.settledUnits);
  return (
    <section aria-labelledby="batch-title" data-testid="batch">
      <h3 id="batch-title">Batch</h3>
      <Figures
        items={[
          ['Provider batch', <code key="id">{batch.batchId}</code>],
          ['Provider status', batch.upstreamStatus],
          [
            'Requests charged',
            `${formatNumber(batch.settledRequests)} of ${formatNumber(batch.requests)}`,
            { 'data-testid': 'batch-requests' },
          ],
          ['Bound (admitted at)', `${formatNumber(batch.boundUnits)} units`, { 'data-testid': 'batch-bound' }],
          ['Units charged', formatNumber(batch.settledUnits), { 'data-testid': 'batch-settled' }],
          ['Released to the period', `${formatNumber(released > 0n ? released : 0n)} units`],
          ['Cost (batch price)', formatMoney(batch.costMicros, currency), { 'data-testid': 'batch-cost' }],
          ['Created', when(batch.createdAt)],
          ['Expires', when(batch.expiresAt)],
          ['Settled', when(batch.settledAt)],
        ]}
      />
    </section>
  );
}
