import type { ModelPriceDto, ProtocolProfile, WorkspaceBudgetDto } from '../../../generated/client/types.gen.js';
import type { BudgetView } from '../../domain/budgets/budget-service.js';
import { KIND_PRICES, type KindPriceName, type PriceRow } from '../../domain/prices/price-repo.js';

/** numeric's text as the wire writes a price: no trailing zeros after the point (`2.500` is `2.5`). */
function decimal(text: string): string {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

/** The kinds' prices a price sets, as on the wire. */
function kindPricesDto(row: PriceRow): Partial<ModelPriceDto> {
  const dto: Partial<ModelPriceDto> = {};
  for (const [name, column] of Object.entries(KIND_PRICES) as [KindPriceName, (typeof KIND_PRICES)[KindPriceName]][]) {
    const value = row[column];
    if (value !== null) dto[name] = decimal(value);
  }
  if (row.per_image_tier) dto.perImageTier = Object.fromEntries(Object.entries(row.per_image_tier).map(([t, v]) => [t, decimal(v)]));
  return dto;
}

export function toModelPriceDto(row: PriceRow): ModelPriceDto {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    modelPattern: row.model_pattern,
    ...(row.provider_connection_id ? { providerConnectionId: row.provider_connection_id } : {}),
    // The column holds only the profiles the price service let in (checkScope).
    ...(row.protocol_profile ? { protocolProfile: row.protocol_profile as ProtocolProfile } : {}),
    currency: row.currency,
    inputPerMillion: decimal(row.input_per_million),
    ...(row.cached_input_per_million !== null ? { cachedInputPerMillion: decimal(row.cached_input_per_million) } : {}),
    ...(row.cache_write_per_million !== null ? { cacheWritePerMillion: decimal(row.cache_write_per_million) } : {}),
    outputPerMillion: decimal(row.output_per_million),
    ...(row.reasoning_per_million !== null ? { reasoningPerMillion: decimal(row.reasoning_per_million) } : {}),
    ...kindPricesDto(row),
    effectiveFrom: row.effective_from.toISOString(),
    ...(row.effective_to ? { effectiveTo: row.effective_to.toISOString() } : {}),
    source: row.source,
  };
}

export function toWorkspaceBudgetDto(view: BudgetView): WorkspaceBudgetDto {
  const { budget } = view;
  return {
    workspaceId: budget.workspace_id,
    currency: view.currency,
    period: budget.period,
    ...(budget.soft_micros !== null ? { softLimitMicros: `${budget.soft_micros}` } : {}),
    ...(budget.hard_micros !== null ? { hardLimitMicros: `${budget.hard_micros}` } : {}),
    windowStart: view.window.start.toISOString(),
    windowEnd: view.window.end.toISOString(),
    spentMicros: `${view.spent}`,
    softCrossed: view.softCrossed,
    hardCrossed: view.hardCrossed,
    timeZone: view.timeZone,
  };
}
