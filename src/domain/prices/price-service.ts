/**
 * The price book: what the providers charge the operator per million tokens, per workspace, versioned by
 * `effective_from` / `effective_to`. A price is never edited: it is closed, and a new one starts. Costs are computed
 * when calls are recorded (src/domain/recording/price-sql.ts) and kept on their usage events, so neither a new price nor a closed one ever
 * changes a cost already recorded.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { isProtocolProfile, PROFILES } from '../../protocols/index.js';
import type { Actor, Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { AuditService } from '../audit/audit-service.js';
import type { Page } from '../pagination.js';
import type { ProviderConnectionRepo } from '../provider-connections/provider-connection-repo.js';
import { patternProblem } from '../quota/model-pricing.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import { assertCurrency } from '../workspaces/currency.js';
import { readLiteLlmPrices, type ImportedPrice } from './litellm-import.js';
import {
  KIND_PRICES,
  type KindPriceColumns,
  type KindPriceName,
  type KindPrices,
  type PriceFilter,
  type PriceRepo,
  type PriceRow,
} from './price-repo.js';

const PRICE = /^(0|[1-9][0-9]{0,11})(\.[0-9]{1,12})?$/;
/** What LiteLLM's file is priced in. */
const LITELLM_CURRENCY = 'USD';

interface PriceScope {
  providerConnectionId?: string | undefined;
  protocolProfile?: string | undefined;
}

interface CreatePriceInput extends PriceScope, KindPrices {
  modelPattern: string;
  currency?: string | undefined;
  inputPerMillion: string;
  cachedInputPerMillion?: string | undefined;
  cacheWritePerMillion?: string | undefined;
  outputPerMillion: string;
  reasoningPerMillion?: string | undefined;
  effectiveFrom: Date;
}

interface ImportPricesInput extends PriceScope {
  prices: Record<string, unknown>;
  effectiveFrom?: Date | undefined;
}

/** An image tier: `{quality}/{size}` as a request names them (src/protocols/usage.ts). */
const TIER = /^[a-z0-9_-]{1,32}\/[a-z0-9_-]{1,32}$/;
const MAX_TIERS = 50;

/** The kinds' prices of a price (each a decimal string, its tiers each named as a tier), else 400 naming the field; `at`: the fields' prefix. */
function assertKindPrices(prices: KindPrices, at: string): void {
  for (const name of Object.keys(KIND_PRICES) as KindPriceName[]) assertPrice(prices[name], `${at}${name}`);
  const tiers = prices.perImageTier;
  if (tiers === undefined) return;
  const param = `${at}perImageTier`;
  const entries = Object.entries(tiers);
  if (entries.length > MAX_TIERS) throw new AppError('invalid_parameter', `${param} may hold at most ${MAX_TIERS} tiers`, { param });
  for (const [tier, price] of entries) {
    if (!TIER.test(tier))
      throw new AppError('invalid_parameter', `${param} names '${tier}', not a tier {quality}/{size} (hd/1024x1792)`, { param });
    assertPrice(price, `${param}.${tier}`);
  }
}

/** A price's kinds as its row's columns (null: not set). */
function kindColumns(prices: KindPrices): KindPriceColumns {
  const columns = { per_image_tier: prices.perImageTier ?? null } as KindPriceColumns;
  for (const [name, column] of Object.entries(KIND_PRICES) as [KindPriceName, (typeof KIND_PRICES)[KindPriceName]][]) {
    columns[column] = prices[name] ?? null;
  }
  return columns;
}

/** A pattern as a LIKE pattern (null: an exact name, compared by equality). */
function likeOf(pattern: string): string | null {
  if (!pattern.includes('*')) return null;
  return pattern.replace(/[\\%_]/g, (c) => `\\${c}`).replaceAll('*', '%');
}

function assertPrice(value: string | undefined, param: string): void {
  if (value !== undefined && !PRICE.test(value)) {
    throw new AppError('invalid_parameter', `${param} must be a non-negative decimal string (at most 12 digits after the point)`, {
      param,
    });
  }
}

function assertPattern(pattern: string, param: string): void {
  const problem = patternProblem(pattern);
  if (problem) throw new AppError('invalid_parameter', `${param} ${problem}`, { param });
}

const scopeKey = (p: { model_pattern: string; provider_connection_id: string | null; protocol_profile: string | null }) =>
  `${p.provider_connection_id ?? ''}\u0000${p.protocol_profile ?? ''}\u0000${p.model_pattern}`;

/** What the price rules read and write through. */
export interface PriceDeps {
  db: Db;
  priceRepo: PriceRepo;
  providerConnectionRepo: ProviderConnectionRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
}

/** The scope's fields checked: one connection of the workspace, or one known protocol, not both. */
async function checkScope({ providerConnectionRepo }: PriceDeps, workspaceId: string, scope: PriceScope): Promise<void> {
  if (scope.providerConnectionId && scope.protocolProfile) {
    throw new AppError('invalid_parameter', 'Give providerConnectionId or protocolProfile, not both', { param: 'protocolProfile' });
  }
  if (scope.protocolProfile && !isProtocolProfile(scope.protocolProfile)) {
    throw new AppError('invalid_parameter', `protocolProfile must be one of ${PROFILES.join(', ')}`, { param: 'protocolProfile' });
  }
  if (scope.providerConnectionId) {
    const connection = await providerConnectionRepo.findById(scope.providerConnectionId);
    if (!connection || connection.workspace_id !== workspaceId) {
      throw new AppError('provider_connection_not_found', 'No provider connection with that id in this workspace', {
        param: 'providerConnectionId',
      });
    }
  }
}

/** Refused with 409 when one of the rows overlaps a price of its pattern and scope in force at or after `from` (or another row). */
async function refuseOverlaps({ priceRepo }: PriceDeps, workspaceId: string, rows: PriceRow[], from: Date, tx: Queryable): Promise<void> {
  const taken = new Set((await priceRepo.overlapping(workspaceId, from, tx)).map(scopeKey));
  for (const row of rows) {
    const key = scopeKey(row);
    if (taken.has(key)) {
      throw new AppError(
        'price_overlap',
        `A price of '${row.model_pattern}' for this scope is in force at or after effectiveFrom; close it first (closeModelPrice)`,
        { param: row.source === 'litellm' ? `prices.${row.model_pattern}` : 'modelPattern' },
      );
    }
    taken.add(key);
  }
}

/**
 * Adds open prices from `from`, all or nothing, under the workspace's row lock (two adds of one pattern wait for each
 * other): refused with 409 when one overlaps a price of its pattern and scope.
 */
async function add(
  deps: PriceDeps,
  actor: Actor,
  workspaceId: string,
  scope: PriceScope,
  priced: ImportedPrice[],
  from: Date,
  source: PriceRow['source'],
) {
  const { db, priceRepo, workspaces, audit, clock } = deps;
  return db.transaction(async (tx) => {
    // Two adds to one book wait for each other, so neither misses the other's overlap.
    await priceRepo.lockBook(workspaceId, tx);
    const workspace = await workspaces.requireWritable(actor, workspaceId, tx);
    const now = clock.now();
    const rows: PriceRow[] = priced.map((p) => ({
      id: newId(),
      workspace_id: workspaceId,
      provider_connection_id: scope.providerConnectionId ?? null,
      protocol_profile: scope.protocolProfile ?? null,
      model_pattern: p.modelPattern,
      model_like: likeOf(p.modelPattern),
      currency: workspace.currency,
      input_per_million: p.inputPerMillion,
      cached_input_per_million: p.cachedInputPerMillion,
      cache_write_per_million: p.cacheWritePerMillion,
      output_per_million: p.outputPerMillion,
      reasoning_per_million: p.reasoningPerMillion,
      ...kindColumns(p),
      effective_from: from,
      effective_to: null,
      source,
      created_at: now,
    }));
    await refuseOverlaps(deps, workspaceId, rows, from, tx);
    await priceRepo.insert(rows, tx);
    await audit.record(
      actor,
      {
        action: source === 'litellm' ? 'prices.imported' : 'price.created',
        resourceType: 'model_price',
        resourceId: rows.length === 1 ? rows[0]!.id : workspaceId,
        workspaceId,
        changes: source === 'litellm' ? { count: rows.length, effectiveFrom: from.toISOString(), ...scope } : { ...rows[0] },
      },
      tx,
    );
    return rows;
  });
}

/** A price's own fields: its pattern, each amount a decimal string, and its currency (if given) the workspace's. */
function checkPriceInput(input: CreatePriceInput, workspaceCurrency: string): void {
  if (input.currency !== undefined) {
    assertCurrency(input.currency, 'currency');
    if (input.currency !== workspaceCurrency) {
      throw new AppError(
        'invalid_parameter',
        `currency must be the workspace's (${workspaceCurrency}): its prices, costs and budget share one`,
        {
          param: 'currency',
        },
      );
    }
  }
}

async function create(deps: PriceDeps, actor: Actor, workspaceId: string, input: CreatePriceInput): Promise<PriceRow> {
  assertPattern(input.modelPattern, 'modelPattern');
  for (const field of [
    'inputPerMillion',
    'cachedInputPerMillion',
    'cacheWritePerMillion',
    'outputPerMillion',
    'reasoningPerMillion',
  ] as const) {
    assertPrice(input[field], field);
  }
  assertKindPrices(input, '');
  const workspace = await deps.workspaces.get(actor, workspaceId);
  checkPriceInput(input, workspace.currency);
  await checkScope(deps, workspaceId, input);
  const price: ImportedPrice = {
    modelPattern: input.modelPattern,
    inputPerMillion: input.inputPerMillion,
    cachedInputPerMillion: input.cachedInputPerMillion ?? null,
    cacheWritePerMillion: input.cacheWritePerMillion ?? null,
    outputPerMillion: input.outputPerMillion,
    reasoningPerMillion: input.reasoningPerMillion ?? null,
    ...kindPricesOf(input),
  };
  const [row] = await add(deps, actor, workspaceId, input, [price], input.effectiveFrom, 'manual');
  return row!;
}

/** The kinds' prices a request gives (those it sets). */
function kindPricesOf(input: KindPrices): KindPrices {
  const prices: KindPrices = {};
  for (const name of Object.keys(KIND_PRICES) as KindPriceName[]) if (input[name] !== undefined) prices[name] = input[name];
  if (input.perImageTier !== undefined) prices.perImageTier = input.perImageTier;
  return prices;
}

async function importLiteLlm(
  deps: PriceDeps,
  actor: Actor,
  workspaceId: string,
  input: ImportPricesInput,
): Promise<{ created: number; skipped: string[] }> {
  const { prices, skipped } = readLiteLlmPrices(input.prices);
  for (const p of prices) assertPattern(p.modelPattern, `prices.${p.modelPattern}`);
  const workspace = await deps.workspaces.get(actor, workspaceId);
  if (workspace.currency !== LITELLM_CURRENCY) {
    throw new AppError('invalid_parameter', `LiteLLM's prices are in USD; the workspace's currency is ${workspace.currency}`, {
      param: 'prices',
    });
  }
  await checkScope(deps, workspaceId, input);
  const rows = await add(deps, actor, workspaceId, input, prices, input.effectiveFrom ?? deps.clock.now(), 'litellm');
  return { created: rows.length, skipped };
}

async function list({ workspaces, priceRepo }: PriceDeps, actor: Actor, filter: PriceFilter): Promise<Page<PriceRow>> {
  await workspaces.get(actor, filter.workspaceId);
  return priceRepo.list(filter);
}

async function close(
  { db, priceRepo, workspaces, audit, clock }: PriceDeps,
  actor: Actor,
  id: string,
  effectiveTo: Date | undefined,
): Promise<PriceRow> {
  return db.transaction(async (tx) => {
    const price = await priceRepo.findForUpdate(id, tx);
    if (!price) throw new AppError('price_not_found', 'Price not found');
    await workspaces.requireWritable(actor, price.workspace_id, tx).catch((err: unknown) => {
      // Another tenant's price looks missing, as everywhere.
      throw err instanceof AppError && err.code === 'workspace_not_found' ? new AppError('price_not_found', 'Price not found') : err;
    });
    if (price.effective_to) throw new AppError('price_closed', 'The price is closed already', { param: 'priceId' });
    const to = effectiveTo ?? clock.now();
    if (to <= price.effective_from) {
      throw new AppError('invalid_parameter', "effectiveTo must be after the price's effectiveFrom", { param: 'effectiveTo' });
    }
    await priceRepo.close(id, to, tx);
    await audit.record(
      actor,
      {
        action: 'price.closed',
        resourceType: 'model_price',
        resourceId: id,
        workspaceId: price.workspace_id,
        changes: { effectiveTo: to.toISOString() },
      },
      tx,
    );
    return { ...price, effective_to: to };
  });
}

export const createPriceService = (deps: PriceDeps) => bindDeps(deps, { create, importLiteLlm, list, close });
