/** Rows <-> DTOs for users, accesses, keys and quota snapshots (bigint -> decimal strings here). */
import type {
  ApiKeyDto,
  IssuedInferenceKeyDto,
  ProvisionedWorkspaceUserDto,
  QuotaSnapshotDto,
  WorkspaceAccessDto,
  WorkspaceUserDto,
} from '../../../generated/client/types.gen.js';
import type { InferenceKeyRow } from '../../domain/inference-keys/inference-key-repo.js';
import { isKeyEnabled, type IssuedKey } from '../../domain/inference-keys/inference-key-service.js';
import type { QuotaSnapshot } from '../../domain/quota/quota-types.js';
import { toRateLimitStateDto } from '../../web/rate-limit-state.js';
import type { ProvisionResult } from '../../domain/accesses/access-service.js';
import type { AccessView } from '../../domain/accesses/access-types.js';

export function toAccessDto(row: AccessView): WorkspaceAccessDto {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    userId: row.user_id,
    externalUserId: row.external_user_id,
    planId: row.plan_id,
    status: row.status,
    accessStartsAt: row.access_starts_at.toISOString(),
    ...(row.access_ends_at ? { accessEndsAt: row.access_ends_at.toISOString() } : {}),
    metadata: row.metadata,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function toWorkspaceUserDto(row: AccessView): WorkspaceUserDto {
  return {
    userId: row.user_id,
    externalUserId: row.external_user_id,
    email: row.email,
    ...(row.user_name ? { name: row.user_name } : {}),
    createdAt: row.user_created_at.toISOString(),
    access: toAccessDto(row),
  };
}

export function toProvisionedDto(result: ProvisionResult): ProvisionedWorkspaceUserDto {
  return {
    userId: result.user.id,
    access: toAccessDto(result.access),
    created: result.created,
    inferenceKeyIssued: result.key !== null,
    ...(result.key
      ? { apiKeyId: result.key.row.id, apiKey: result.key.apiKey, keyExpiresAt: result.key.row.expires_at.toISOString() }
      : {}),
    ...(result.currentPeriod ? { quotaPeriodEndsAt: result.currentPeriod.period_end.toISOString() } : {}),
  };
}

export function toApiKeyDto(row: InferenceKeyRow, now: Date): ApiKeyDto {
  return {
    id: row.id,
    workspaceAccessId: row.workspace_access_id,
    name: row.name,
    prefix: row.prefix,
    expiresAt: row.expires_at.toISOString(),
    ...(row.last_request_at ? { lastRequestAt: row.last_request_at.toISOString() } : {}),
    enabled: isKeyEnabled(row, now),
    createdAt: row.created_at.toISOString(),
    ...(row.revoked_at ? { revokedAt: row.revoked_at.toISOString() } : {}),
  };
}

export function toIssuedKeyDto(issued: IssuedKey, now: Date): IssuedInferenceKeyDto {
  return { ...toApiKeyDto(issued.row, now), apiKey: issued.apiKey };
}

export function toQuotaSnapshotDto(s: QuotaSnapshot): QuotaSnapshotDto {
  return {
    workspaceAccessId: s.workspaceAccessId,
    planId: s.planId,
    quotaStrategyId: s.quotaStrategyId,
    quotaPeriodId: s.quotaPeriodId,
    grantedUnits: `${s.grantedUnits}`,
    reservedUnits: `${s.reservedUnits}`,
    consumedUnits: `${s.consumedUnits}`,
    availableUnits: `${s.availableUnits}`,
    periodStart: s.periodStart.toISOString(),
    periodEnd: s.periodEnd.toISOString(),
    ...(s.rateLimits ? { rateLimits: toRateLimitStateDto(s.rateLimits) } : {}),
    toppedUpUnits: `${s.toppedUpUnits}`,
    grantSource: s.grantSource,
    ...(s.proration
      ? {
          proration: {
            cycleStart: s.proration.cycleStart.toISOString(),
            planQuotaUnits: `${s.proration.planQuotaUnits}`,
            shareUnits: `${s.proration.shareUnits}`,
            carriedUnits: `${s.proration.carriedUnits}`,
          },
        }
      : {}),
    ...(s.typicalCallUnits !== undefined ? { typicalCallUnits: `${s.typicalCallUnits}` } : {}),
    ...(s.quotaRefusedAt ? { quotaRefusedAt: s.quotaRefusedAt.toISOString() } : {}),
  };
}
