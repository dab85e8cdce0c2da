import type {
  CloseModelPriceData,
  CloseModelPriceResponses,
  CreateModelPriceData,
  CreateModelPriceResponses,
  ExportInvocationsData,
  ExportInvocationsResponses,
  ExportUsageSummaryData,
  ExportUsageSummaryResponses,
  GetWorkspaceBudgetData,
  GetWorkspaceBudgetResponses,
  ImportModelPricesData,
  ImportModelPricesResponses,
  ListModelPricesData,
  ListModelPricesResponses,
  SetWorkspaceBudgetData,
  SetWorkspaceBudgetResponses,
} from '../../../generated/client/types.gen.js';
import type { Services } from '../../domain/services.js';
import { created, handler, ok, page, streamed, type HandlerMap } from '../../http/handler.js';
import { listQuery, optionalTimestamp, parseTimestamp } from '../../http/wire.js';
import { KIND_COLUMNS, KIND_COUNTS } from '../../domain/recording/kind-sql.js';
import { csvLines, usageSumLines } from './csv.js';
import { toModelPriceDto, toWorkspaceBudgetDto } from './price-mapper.js';

const CSV = 'text/csv; charset=utf-8';
const attachment = (name: string) => ({ 'Content-Disposition': `attachment; filename="${name}"` });

export function moneyHandlers({ prices, budgets, invocations }: Services): HandlerMap {
  return {
    createModelPrice: handler<CreateModelPriceData, CreateModelPriceResponses>(async ({ actor, path, body }) =>
      created(
        toModelPriceDto(
          await prices.create(actor, path.workspaceId, { ...body, effectiveFrom: parseTimestamp(body.effectiveFrom, 'effectiveFrom') }),
        ),
      ),
    ),
    listModelPrices: handler<ListModelPricesData, ListModelPricesResponses>(async ({ actor, path, query }) => {
      const { at, ...rest } = query;
      const result = await prices.list(actor, { ...listQuery(rest), workspaceId: path.workspaceId, at: optionalTimestamp(at, 'at') });
      return page(result.items.map(toModelPriceDto), result.nextAfter);
    }),
    importModelPrices: handler<ImportModelPricesData, ImportModelPricesResponses>(async ({ actor, path, body }) =>
      ok(
        await prices.importLiteLlm(actor, path.workspaceId, {
          ...body,
          effectiveFrom: optionalTimestamp(body.effectiveFrom, 'effectiveFrom'),
        }),
      ),
    ),
    closeModelPrice: handler<CloseModelPriceData, CloseModelPriceResponses>(async ({ actor, path, body }) =>
      ok(toModelPriceDto(await prices.close(actor, path.priceId, optionalTimestamp(body?.effectiveTo, 'effectiveTo')))),
    ),
    getWorkspaceBudget: handler<GetWorkspaceBudgetData, GetWorkspaceBudgetResponses>(async ({ actor, path }) =>
      ok(toWorkspaceBudgetDto(await budgets.get(actor, path.workspaceId))),
    ),
    setWorkspaceBudget: handler<SetWorkspaceBudgetData, SetWorkspaceBudgetResponses>(async ({ actor, path, body }) =>
      ok(toWorkspaceBudgetDto(await budgets.set(actor, path.workspaceId, body))),
    ),
    exportInvocations: handler<ExportInvocationsData, ExportInvocationsResponses>(async ({ actor, path, query }) => {
      const { currency, pages, release } = await invocations.exportInvocations(actor, {
        ...listQuery(query),
        workspaceId: path.workspaceId,
      });
      const header = [
        'id',
        'started_at',
        'completed_at',
        'status',
        'error_code',
        'workspace_access_id',
        'inference_key_id',
        'provider_connection_id',
        'requested_model',
        'upstream_model',
        'quota_units',
        'input_tokens',
        'cached_input_tokens',
        'output_tokens',
        'cost_micros',
        'currency',
        'price_id',
        'total_latency_ms',
        'request_id',
        'user_email',
        'user_external_id',
        'endpoint',
        'error_message',
        // The kinds beyond text tokens (docs/pricing.md, "Kinds"), last: the columns before them keep their places.
        ...KIND_COLUMNS,
      ];
      const lines = csvLines(header, pages, (r) => [
        r.id,
        r.started_at,
        r.completed_at,
        r.status,
        r.error_code,
        r.workspace_access_id,
        r.inference_key_id,
        r.provider_connection_id,
        r.requested_model,
        r.attempt_upstream_model,
        r.quota_units,
        r.input_tokens,
        r.cached_input_tokens,
        r.output_tokens,
        r.cost_micros,
        r.cost_micros === null ? null : currency,
        r.price_id,
        r.total_latency_ms,
        r.request_id,
        r.user_email,
        r.user_external_id,
        r.endpoint,
        r.error_message,
        ...KIND_COLUMNS.map((c) => r[c]),
      ]);
      return streamed(CSV, lines, attachment('invocations.csv'), release);
    }),
    exportUsageSummary: handler<ExportUsageSummaryData, ExportUsageSummaryResponses>(async ({ actor, path, query }) => {
      const { currency, pages, release } = await invocations.exportUsageSummary(actor, {
        workspaceId: path.workspaceId,
        since: parseTimestamp(query.since, 'since'),
        until: parseTimestamp(query.until, 'until'),
        granularity: query.granularity ?? 'day',
        groupBy: query.groupBy ?? 'model',
        timeZone: query.timeZone ?? 'UTC',
      });
      const header = [
        'start',
        'key',
        'units',
        'input_tokens',
        'cached_input_tokens',
        'output_tokens',
        'events',
        'cost_micros',
        'unpriced_events',
        'calls',
        'failed_calls',
        'refused_calls',
        'currency',
        ...KIND_COUNTS,
      ];
      return streamed(CSV, usageSumLines(header, pages, currency), attachment('usage-summary.csv'), release);
    }),
  };
}
