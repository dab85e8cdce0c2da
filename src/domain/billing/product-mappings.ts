/** Product mappings: which plan a provider's product or price sells, and whether it may be sold by a hosted checkout. */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, type Actor } from '../actor.js';
import type { Page, PageRequest } from '../pagination.js';
import type { BillingRepo, ProductMappingRow } from './billing-repo.js';
import { requireActive, visibleConnection, writableConnection, type ConnectionDeps } from './connection-lookup.js';

export interface CreateMappingInput {
  externalProductId: string;
  externalPriceId?: string | undefined;
  planId: string;
  checkoutEnabled?: boolean | undefined;
}

async function checkPlan(repo: BillingRepo, workspaceId: string, planId: string, q: Queryable): Promise<void> {
  const plan = await repo.findPlan(planId, q);
  if (!plan || plan.workspace_id !== workspaceId)
    throw new AppError('plan_not_found', 'Plan not found in this workspace', { param: 'planId' });
  if (plan.status === 'ARCHIVED')
    throw new AppError('plan_not_active', 'The plan is archived', { param: 'planId', current_status: plan.status });
}

export async function createMapping(
  deps: ConnectionDeps,
  actor: Actor,
  connectionId: string,
  dto: CreateMappingInput,
): Promise<ProductMappingRow> {
  const { db, repo, audit, clock } = deps;
  if (dto.checkoutEnabled && !dto.externalPriceId) {
    throw new AppError('invalid_parameter', 'checkoutEnabled needs externalPriceId: checkouts sell a price', {
      param: 'externalPriceId',
    });
  }
  return db.transaction(async (tx) => {
    const conn = await writableConnection(deps, actor, connectionId, tx);
    requireActive(conn);
    await checkPlan(repo, conn.workspace_id, dto.planId, tx);
    const row = await repo.insertMapping(
      {
        id: newId(),
        workspace_id: conn.workspace_id,
        billing_connection_id: conn.id,
        external_product_id: dto.externalProductId,
        external_price_id: dto.externalPriceId ?? null,
        plan_id: dto.planId,
        checkout_enabled: dto.checkoutEnabled ?? false,
        status: 'ACTIVE',
        created_at: clock.now(),
        disabled_at: null,
      },
      tx,
    );
    await audit.record(
      actor,
      {
        action: 'billing_product_mapping.created',
        resourceType: 'billing_product_mapping',
        resourceId: row.id,
        workspaceId: conn.workspace_id,
        changes: { ...dto, billingConnectionId: conn.id },
      },
      tx,
    );
    return row;
  });
}

export async function listMappings(
  deps: ConnectionDeps,
  actor: Actor,
  connectionId: string,
  filter: PageRequest & { status?: string | undefined },
): Promise<Page<ProductMappingRow>> {
  await visibleConnection(deps, actor, connectionId);
  return deps.repo.listMappings({ ...filter, connectionId });
}

export async function disableMapping(
  { db, repo, workspaces, audit, clock }: ConnectionDeps,
  actor: Actor,
  mappingId: string,
): Promise<void> {
  await db.transaction(async (tx) => {
    const mapping = await repo.findMapping(mappingId, tx);
    if (!mapping) throw new AppError('product_mapping_not_found', 'Product mapping not found');
    assertVisible(actor, mapping.workspace_id, 'product_mapping_not_found', 'Product mapping');
    await workspaces.requireWritable(actor, mapping.workspace_id, tx);
    if (mapping.status === 'DISABLED') return;
    await repo.updateMapping(mappingId, { status: 'DISABLED', checkout_enabled: false, disabled_at: clock.now() }, tx);
    await audit.record(
      actor,
      {
        action: 'billing_product_mapping.disabled',
        resourceType: 'billing_product_mapping',
        resourceId: mappingId,
        workspaceId: mapping.workspace_id,
        changes: { status: 'DISABLED' },
      },
      tx,
    );
  });
}
