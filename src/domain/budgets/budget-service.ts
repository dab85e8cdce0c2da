/**
 * Workspace budgets: a daily or monthly spend budget in the workspace's currency. The soft level only reports; the hard
 * level has the gateway refuse new metered calls (402 `workspace_budget_exceeded`) until its window ends.
 *
 * After each batch of calls is recorded, `checkSpend` reads the spend of the batch's workspaces that have a budget and
 * applies the rule (budget-rule.ts). A hard level crossed is written to the budget row (`hard_exceeded_until`), which
 * the gateway's key lookup reads, and announced on the change feed: every process drops its cached lookups of the
 * workspace and refuses its next call (docs/pricing.md "Budgets" gives the bound).
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import type { Actor, Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { AuditService } from '../audit/audit-service.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { Events } from '../events/outbox.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { BudgetPeriod, BudgetRepo, BudgetRow } from './budget-repo.js';
import { budgetLevels, budgetWindow, type BudgetWindow } from './budget-rule.js';

const MICROS = /^(0|[1-9][0-9]{0,18})$/;
const MAX_MICROS = 9_223_372_036_854_775_807n;

interface SetBudgetInput {
  period: BudgetPeriod;
  softLimitMicros?: string | undefined;
  hardLimitMicros?: string | undefined;
}

export interface BudgetView {
  budget: BudgetRow;
  currency: string;
  /** The workspace's time zone: its window is a day or month there. */
  timeZone: string;
  window: BudgetWindow;
  spent: bigint;
  softCrossed: boolean;
  hardCrossed: boolean;
}

function limitOf(value: string | undefined, param: string): bigint | null {
  if (value === undefined) return null;
  if (!MICROS.test(value) || BigInt(value) > MAX_MICROS) {
    throw new AppError('invalid_parameter', `${param} must be a whole number of micro-units from 0 to ${MAX_MICROS}, as a decimal string`, {
      param,
    });
  }
  return BigInt(value);
}

/** What the budget rules read and write through. */
export interface BudgetDeps {
  db: Db;
  budgetRepo: BudgetRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  changes: ChangeFeed;
  clock: Clock;
  /** Each level crossed, once per window, is a `workspace.budget_crossed` event, written with the crossing. */
  events: Events;
}

/** Applies the rule to one locked budget at `now`, in `tx`: its new state, its events, and its view. */
async function applyOne({ budgetRepo, changes, events }: BudgetDeps, budget: BudgetRow, now: Date, tx: Queryable): Promise<BudgetView> {
  const { currency, timeZone } = await budgetRepo.settingsOf(budget.workspace_id, tx);
  const window = budgetWindow(budget.period, now, timeZone);
  const spent = await budgetRepo.spentSince(budget.workspace_id, window.start, tx);
  const levels = budgetLevels(budget, spent, window);
  const { state } = levels;
  const changed =
    state.soft_crossed_window?.getTime() !== budget.soft_crossed_window?.getTime() ||
    state.hard_crossed_window?.getTime() !== budget.hard_crossed_window?.getTime() ||
    state.hard_exceeded_until?.getTime() !== budget.hard_exceeded_until?.getTime();
  if (changed) await budgetRepo.update(budget.workspace_id, state, tx);
  // The gateway's lookups read hard_exceeded_until: every process drops them when it changes.
  if (state.hard_exceeded_until?.getTime() !== budget.hard_exceeded_until?.getTime()) {
    await changes.announce({ kind: 'workspace', id: budget.workspace_id }, tx);
  }
  for (const level of levels.newlyCrossed) {
    const limitMicros = (level === 'soft' ? budget.soft_micros : budget.hard_micros)!;
    await events.emit(tx, budget.workspace_id, 'workspace.budget_crossed', {
      level,
      period: budget.period,
      limitMicros: `${limitMicros}`,
      spentMicros: `${spent}`,
      currency,
    });
  }
  return {
    budget: { ...budget, ...state },
    currency,
    timeZone,
    window,
    spent,
    softCrossed: levels.softCrossed,
    hardCrossed: levels.hardCrossed,
  };
}

/** Applies the rule to the locked budgets `rows` at `now`, in `tx`: the new state, its events and the views. */
async function apply(deps: BudgetDeps, rows: BudgetRow[], now: Date, tx: Queryable): Promise<BudgetView[]> {
  const views: BudgetView[] = [];
  for (const budget of rows) views.push(await applyOne(deps, budget, now, tx));
  return views;
}

async function get({ workspaces, budgetRepo, clock }: BudgetDeps, actor: Actor, workspaceId: string): Promise<BudgetView> {
  const workspace = await workspaces.get(actor, workspaceId);
  const budget = await budgetRepo.find(workspaceId);
  if (!budget) throw new AppError('budget_not_found', 'The workspace has no budget');
  const timeZone = workspace.time_zone;
  const window = budgetWindow(budget.period, clock.now(), timeZone);
  const spent = await budgetRepo.spentSince(workspaceId, window.start);
  const levels = budgetLevels(budget, spent, window);
  return {
    budget,
    currency: workspace.currency,
    timeZone,
    window,
    spent,
    softCrossed: levels.softCrossed,
    hardCrossed: levels.hardCrossed,
  };
}

async function set(deps: BudgetDeps, actor: Actor, workspaceId: string, input: SetBudgetInput): Promise<BudgetView> {
  const { db, budgetRepo, workspaces, audit, clock } = deps;
  const soft = limitOf(input.softLimitMicros, 'softLimitMicros');
  const hard = limitOf(input.hardLimitMicros, 'hardLimitMicros');
  return db.transaction(async (tx) => {
    await workspaces.requireWritable(actor, workspaceId, tx);
    const now = clock.now();
    const [current] = await budgetRepo.lock([workspaceId], tx);
    const saved = await budgetRepo.upsert(
      {
        workspace_id: workspaceId,
        period: input.period,
        soft_micros: soft,
        hard_micros: hard,
        soft_crossed_window: current?.soft_crossed_window ?? null,
        hard_crossed_window: current?.hard_crossed_window ?? null,
        hard_exceeded_until: current?.hard_exceeded_until ?? null,
        updated_at: now,
      },
      tx,
    );
    // The new levels apply at once: a budget set below what was spent already refuses the next call.
    const views = await apply(deps, [saved], now, tx);
    await audit.record(
      actor,
      { action: 'workspace.budget_set', resourceType: 'workspace', resourceId: workspaceId, workspaceId, changes: { ...input } },
      tx,
    );
    return views[0]!;
  });
}

/**
 * After a batch of calls is recorded: the budgets of its workspaces that have one (the record statement says
 * which: call-repo.ts, RecordedCost), checked against what they spent.
 */
async function checkSpend(deps: BudgetDeps, workspaceIds: string[]): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const rows = await deps.budgetRepo.lock(workspaceIds, tx);
    await apply(deps, rows, deps.clock.now(), tx);
  });
}

export const createBudgetService = (deps: BudgetDeps) => bindDeps(deps, { get, set, checkSpend });
