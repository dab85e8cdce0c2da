import type {
  ActivateWorkspaceAccessData,
  ActivateWorkspaceAccessResponses,
  ChangeAccessPlanData,
  ChangeAccessPlanResponses,
  GetInferenceKeyData,
  GetInferenceKeyResponses,
  GetWorkspaceAccessData,
  GetWorkspaceAccessQuotaData,
  GetWorkspaceAccessQuotaResponses,
  GrantAccessUnitsData,
  GrantAccessUnitsResponses,
  GetWorkspaceAccessResponses,
  IssueInferenceKeyData,
  IssueInferenceKeyResponses,
  ListInferenceKeysData,
  ListInferenceKeysResponses,
  ListWorkspaceUsersData,
  ListWorkspaceUsersResponses,
  ProvisionWorkspaceUserData,
  ProvisionWorkspaceUserResponses,
  RenewWorkspaceAccessData,
  RenewWorkspaceAccessResponses,
  RevokeInferenceKeyData,
  RevokeInferenceKeyResponses,
  SuspendWorkspaceAccessData,
  SuspendWorkspaceAccessResponses,
} from '../../../generated/client/types.gen.js';
import { toAccessDto, toApiKeyDto, toIssuedKeyDto, toProvisionedDto, toQuotaSnapshotDto, toWorkspaceUserDto } from './access-mapper.js';
import { parseInt64 } from '../plans/plan-mapper.js';
import type { Services } from '../../domain/services.js';
import { created, handler, noContent, ok, page, type HandlerContext, type HandlerMap } from '../../http/handler.js';
import { listQuery, optionalTimestamp, parseTimestamp } from '../../http/wire.js';

export function accessHandlers({ accesses }: Services, { clock }: HandlerContext): HandlerMap {
  return {
    provisionWorkspaceUser: handler<ProvisionWorkspaceUserData, ProvisionWorkspaceUserResponses>(async ({ actor, path, body }) =>
      created(toProvisionedDto(await accesses.provision(actor, path.workspaceId, body))),
    ),
    listWorkspaceUsers: handler<ListWorkspaceUsersData, ListWorkspaceUsersResponses>(async ({ actor, path, query }) => {
      const result = await accesses.list(actor, path.workspaceId, listQuery(query));
      return page(result.items.map(toWorkspaceUserDto), result.nextAfter);
    }),
    getWorkspaceAccess: handler<GetWorkspaceAccessData, GetWorkspaceAccessResponses>(async ({ actor, path }) =>
      ok(toAccessDto(await accesses.get(actor, path.accessId))),
    ),
    activateWorkspaceAccess: handler<ActivateWorkspaceAccessData, ActivateWorkspaceAccessResponses>(async ({ actor, path }) =>
      ok(toAccessDto(await accesses.activate(actor, path.accessId))),
    ),
    suspendWorkspaceAccess: handler<SuspendWorkspaceAccessData, SuspendWorkspaceAccessResponses>(async ({ actor, path }) =>
      ok(toAccessDto(await accesses.suspend(actor, path.accessId))),
    ),
    renewWorkspaceAccess: handler<RenewWorkspaceAccessData, RenewWorkspaceAccessResponses>(async ({ actor, path, body }) =>
      ok(
        toAccessDto(
          await accesses.renew(actor, path.accessId, {
            planId: body.planId,
            periodStart: parseTimestamp(body.periodStart, 'periodStart'),
            periodEnd: parseTimestamp(body.periodEnd, 'periodEnd'),
          }),
        ),
      ),
    ),
    changeAccessPlan: handler<ChangeAccessPlanData, ChangeAccessPlanResponses>(async ({ actor, path, body }) =>
      ok(
        toAccessDto(
          await accesses.changePlan(actor, path.accessId, {
            planId: body.planId,
            effectiveAt: optionalTimestamp(body.effectiveAt, 'effectiveAt'),
          }),
        ),
      ),
    ),
    issueInferenceKey: handler<IssueInferenceKeyData, IssueInferenceKeyResponses>(async ({ actor, path, body }) => {
      const issued = await accesses.issueKey(actor, path.accessId, {
        name: body?.name,
        expiresAt: optionalTimestamp(body?.expiresAt, 'expiresAt'),
      });
      return created(toIssuedKeyDto(issued, clock.now()));
    }),
    listInferenceKeys: handler<ListInferenceKeysData, ListInferenceKeysResponses>(async ({ actor, path, query }) => {
      const result = await accesses.listKeys(actor, path.accessId, listQuery(query));
      const now = clock.now();
      return page(
        result.items.map((row) => toApiKeyDto(row, now)),
        result.nextAfter,
      );
    }),
    getInferenceKey: handler<GetInferenceKeyData, GetInferenceKeyResponses>(async ({ actor, path }) =>
      ok(toApiKeyDto(await accesses.getKey(actor, path.keyId), clock.now())),
    ),
    revokeInferenceKey: handler<RevokeInferenceKeyData, RevokeInferenceKeyResponses>(async ({ actor, path }) => {
      await accesses.revokeKey(actor, path.accessId, path.keyId);
      return noContent();
    }),
    getWorkspaceAccessQuota: handler<GetWorkspaceAccessQuotaData, GetWorkspaceAccessQuotaResponses>(async ({ actor, path }) =>
      ok(toQuotaSnapshotDto(await accesses.quotaSnapshot(actor, path.accessId))),
    ),
    grantAccessUnits: handler<GrantAccessUnitsData, GrantAccessUnitsResponses>(async ({ actor, path, body }) =>
      ok(
        toQuotaSnapshotDto(
          await accesses.grantUnits(actor, path.accessId, { units: parseInt64(body.units, 'units'), reason: body.reason }),
        ),
      ),
    ),
  };
}
