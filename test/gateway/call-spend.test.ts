/**
 * call-spend.ts: what the gateway does with a recorded batch's costs. Each series is counted in the metrics; the
 * budgets are checked only for the workspaces with a budget that the batch charged (the record statement says which:
 * `budgeted`), so a priced workspace without a budget costs no query per batch.
 */
import { describe, expect, it } from 'vitest';
import type { RecordedCost } from '../../src/domain/recording/record-sql.js';
import { createCallSpend } from '../../src/records/call-spend.js';
import { createLogger } from '../../src/observability/logger.js';

const series = (workspaceId: string, o: Partial<RecordedCost> = {}): RecordedCost => ({
  workspace_id: workspaceId,
  connection_id: 'c1',
  model: 'gpt-4o',
  cost_micros: '25',
  unpriced: '0',
  budgeted: false,
  ...o,
});

describe('call spend', () => {
  it('checks the budgets of the charged workspaces that have one, and counts every series', async () => {
    const checked: string[][] = [];
    const counted: string[] = [];
    const spend = createCallSpend({
      checkBudgets: (ids) => (checked.push(ids), Promise.resolve()),
      onCost: (workspaceId, _connection, model, cost, unpriced) => counted.push(`${workspaceId} ${model} ${cost} ${unpriced}`),
      logger: createLogger('silent'),
    });
    spend.recorded([
      series('w-plain'),
      series('w-budget', { budgeted: true }),
      series('w-budget', { model: 'gpt-4o-mini', budgeted: true }),
      // Budgeted but charged nothing (no price matched): nothing to check.
      series('w-unpriced', { cost_micros: null, unpriced: '3', budgeted: true }),
    ]);
    await spend.drain();
    expect(checked).toEqual([['w-budget']]);
    expect(counted).toEqual(['w-plain gpt-4o 25 0', 'w-budget gpt-4o 25 0', 'w-budget gpt-4o-mini 25 0', 'w-unpriced gpt-4o null 3']);
  });

  it('checks nothing for a batch whose workspaces have no budget', async () => {
    let checks = 0;
    const spend = createCallSpend({
      checkBudgets: () => (checks++, Promise.resolve()),
      logger: createLogger('silent'),
    });
    spend.recorded([series('w1'), series('w2', { model: 'o3' })]);
    await spend.drain();
    expect(checks).toBe(0);
  });
});
