import type {
  BindPlanStrategyData,
  BindPlanStrategyResponses,
  ClosePlanStrategyBindingData,
  ClosePlanStrategyBindingResponses,
  CreatePlanData,
  CreatePlanResponses,
  CreateQuotaStrategyData,
  CreateQuotaStrategyResponses,
  GetPlanData,
  GetPlanResponses,
  GetPlanStrategyData,
  GetPlanStrategyResponses,
  ListPlansData,
  ListPlansResponses,
  ListPlanStrategiesData,
  ListPlanStrategiesResponses,
  ListPlanStrategyBindingsData,
  ListPlanStrategyBindingsResponses,
  PublishPlanData,
  PublishPlanResponses,
  PublishPlanStrategyData,
  PublishPlanStrategyResponses,
  SetPlanPassthroughClassesData,
  SetPlanPassthroughClassesResponses,
  SetPlanRequestLogData,
  SetPlanRequestLogResponses,
  SetPlanRateLimitsData,
  SetPlanRateLimitsResponses,
  UpdatePlanData,
  UpdatePlanResponses,
} from '../../../generated/client/types.gen.js';
import type { Services } from '../../domain/services.js';
import { fromCreateStrategyDto, toBindingDto, toPlanDetailDto, toPlanDto, toStrategyDto } from './plan-mapper.js';
import { created, handler, ok, page, type HandlerMap } from '../../http/handler.js';
import { listQuery, optionalTimestamp, parseTimestamp } from '../../http/wire.js';

export function planHandlers({ plans }: Services): HandlerMap {
  return {
    createPlan: handler<CreatePlanData, CreatePlanResponses>(async ({ actor, path, body }) =>
      created(toPlanDto(await plans.createPlan(actor, path.workspaceId, body))),
    ),
    listPlans: handler<ListPlansData, ListPlansResponses>(async ({ actor, path, query }) => {
      const result = await plans.listPlans(actor, path.workspaceId, listQuery(query));
      return page(result.items.map(toPlanDto), result.nextAfter);
    }),
    getPlan: handler<GetPlanData, GetPlanResponses>(async ({ actor, path }) => {
      const { plan, bindings } = await plans.getPlan(actor, path.planId);
      return ok(toPlanDetailDto(plan, bindings));
    }),
    updatePlan: handler<UpdatePlanData, UpdatePlanResponses>(async ({ actor, path, body }) =>
      ok(toPlanDto(await plans.updatePlan(actor, path.planId, body))),
    ),
    setPlanRateLimits: handler<SetPlanRateLimitsData, SetPlanRateLimitsResponses>(async ({ actor, path, body }) =>
      ok(toPlanDto(await plans.setRateLimits(actor, path.planId, body))),
    ),
    setPlanPassthroughClasses: handler<SetPlanPassthroughClassesData, SetPlanPassthroughClassesResponses>(async ({ actor, path, body }) =>
      ok(toPlanDto(await plans.setPassthroughClasses(actor, path.planId, body.passthroughClasses))),
    ),
    setPlanRequestLog: handler<SetPlanRequestLogData, SetPlanRequestLogResponses>(async ({ actor, path, body }) =>
      ok(toPlanDto(await plans.setRequestLog(actor, path.planId, body.requestLog))),
    ),
    publishPlan: handler<PublishPlanData, PublishPlanResponses>(async ({ actor, path }) =>
      ok(toPlanDto(await plans.publishPlan(actor, path.planId))),
    ),
    createQuotaStrategy: handler<CreateQuotaStrategyData, CreateQuotaStrategyResponses>(async ({ actor, path, body }) =>
      created(toStrategyDto(await plans.createStrategy(actor, path.workspaceId, fromCreateStrategyDto(body)))),
    ),
    listPlanStrategies: handler<ListPlanStrategiesData, ListPlanStrategiesResponses>(async ({ actor, path, query }) => {
      const result = await plans.listStrategies(actor, path.workspaceId, listQuery(query));
      return page(result.items.map(toStrategyDto), result.nextAfter);
    }),
    getPlanStrategy: handler<GetPlanStrategyData, GetPlanStrategyResponses>(async ({ actor, path }) =>
      ok(toStrategyDto(await plans.getStrategy(actor, path.strategyId))),
    ),
    publishPlanStrategy: handler<PublishPlanStrategyData, PublishPlanStrategyResponses>(async ({ actor, path }) =>
      ok(toStrategyDto(await plans.publishStrategy(actor, path.strategyId))),
    ),
    bindPlanStrategy: handler<BindPlanStrategyData, BindPlanStrategyResponses>(async ({ actor, path, body }) =>
      created(
        toBindingDto(
          await plans.bind(actor, path.planId, {
            strategyId: body.strategyId,
            effectiveFrom: parseTimestamp(body.effectiveFrom, 'effectiveFrom'),
          }),
        ),
      ),
    ),
    listPlanStrategyBindings: handler<ListPlanStrategyBindingsData, ListPlanStrategyBindingsResponses>(async ({ actor, path, query }) => {
      const result = await plans.listBindings(actor, path.planId, listQuery(query));
      return page(result.items.map(toBindingDto), result.nextAfter);
    }),
    closePlanStrategyBinding: handler<ClosePlanStrategyBindingData, ClosePlanStrategyBindingResponses>(async ({ actor, path, query }) => {
      await plans.closeBinding(actor, path.bindingId, optionalTimestamp(query.effectiveAt, 'effectiveAt'));
      return ok({ accepted: true });
    }),
  };
}
