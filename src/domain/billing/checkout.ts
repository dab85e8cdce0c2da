/**
 * Hosted checkouts: a provider-hosted subscription checkout for an access, selling a mapping's price.
 * Every refusal comes before the provider is asked: a refused request leaves no session there.
 */
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, type Actor } from '../actor.js';
import type { AccessRef, BillingConnectionRow, CheckoutRow, ProductMappingRow } from './billing-repo.js';
import { ProviderError, type BillingProviderClient } from './billing-types.js';
import { requireActive, type ConnectionDeps } from './connection-lookup.js';

export interface CheckoutInput {
  billingConnectionId: string;
  productMappingId: string;
  successUrl?: string | undefined;
  cancelUrl?: string | undefined;
  customerEmail?: string | undefined;
}

/** What a checkout sells, and to whom, once every refusal is past. */
interface CheckoutTarget {
  access: AccessRef;
  conn: BillingConnectionRow;
  mapping: ProductMappingRow & { external_price_id: string };
  client: BillingProviderClient;
}

/** The access, visible and its workspace writable, and one of its workspace's active HOSTED connections. */
async function sellingConnection(
  { repo, workspaces }: ConnectionDeps,
  actor: Actor,
  accessId: string,
  dto: CheckoutInput,
): Promise<{ access: AccessRef; conn: BillingConnectionRow }> {
  const access = await repo.findAccess(accessId);
  if (!access) throw new AppError('access_not_found', 'Workspace access not found');
  assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');
  await workspaces.requireWritableBeforeCall(actor, access.workspace_id);
  const conn = await repo.findConnection(dto.billingConnectionId);
  if (!conn || conn.workspace_id !== access.workspace_id) {
    throw new AppError('billing_connection_not_found', "Billing connection not found in the access's workspace", {
      param: 'billingConnectionId',
    });
  }
  requireActive(conn);
  if (conn.kind !== 'HOSTED') {
    throw new AppError('checkout_not_available', 'Checkouts need a HOSTED connection; APP_SYNC periods are reported by your backend', {
      param: 'billingConnectionId',
    });
  }
  return { access, conn };
}

async function checkoutTarget(deps: ConnectionDeps, actor: Actor, accessId: string, dto: CheckoutInput): Promise<CheckoutTarget> {
  const { access, conn } = await sellingConnection(deps, actor, accessId, dto);
  if (access.status === 'REVOKED') {
    throw new AppError('illegal_transition', 'A REVOKED access cannot subscribe', { current_status: access.status });
  }
  const mapping = await deps.repo.findMapping(dto.productMappingId);
  if (!mapping || mapping.billing_connection_id !== conn.id) {
    throw new AppError('product_mapping_not_found', 'Product mapping not found on this connection', { param: 'productMappingId' });
  }
  const priceId = mapping.external_price_id;
  if (mapping.status !== 'ACTIVE' || !mapping.checkout_enabled || !priceId) {
    throw new AppError('checkout_not_available', 'The mapping is not enabled for checkout', { param: 'productMappingId' });
  }
  if (conn.provider === 'STRIPE' && !dto.successUrl) {
    throw new AppError('invalid_parameter', 'A Stripe checkout needs successUrl', { param: 'successUrl' });
  }
  const client = deps.clientFor(conn);
  if (!client) throw new AppError('billing_not_configured', 'The connection has no provider credential', { param: 'billingConnectionId' });
  return { access, conn, mapping: { ...mapping, external_price_id: priceId }, client };
}

async function openAtProvider(
  { mapping, client }: CheckoutTarget,
  accessId: string,
  dto: CheckoutInput,
  idempotencyKey: string | undefined,
): Promise<{ id: string; url: string }> {
  try {
    return await client.createCheckout({
      accessId,
      priceId: mapping.external_price_id,
      successUrl: dto.successUrl,
      cancelUrl: dto.cancelUrl,
      customerEmail: dto.customerEmail,
      idempotencyKey: idempotencyKey ? `nexus-checkout-${accessId}-${idempotencyKey}` : undefined,
    });
  } catch (err) {
    if (err instanceof ProviderError)
      throw new AppError('billing_provider_error', `The billing provider did not create the checkout: ${err.message}`);
    throw err;
  }
}

/** A provider-hosted subscription checkout for the access; the Idempotency-Key goes on to the provider. */
export async function createCheckout(
  deps: ConnectionDeps,
  actor: Actor,
  accessId: string,
  dto: CheckoutInput,
  idempotencyKey: string | undefined,
): Promise<{ row: CheckoutRow; conn: BillingConnectionRow }> {
  const { db, repo, workspaces, audit, clock } = deps;
  const target = await checkoutTarget(deps, actor, accessId, dto);
  const { access, conn, mapping } = target;
  const checkout = await openAtProvider(target, accessId, dto, idempotencyKey);
  const row = await db.transaction(async (tx) => {
    await workspaces.requireWritable(actor, access.workspace_id, tx);
    const created = await repo.insertCheckout(
      {
        id: newId(),
        workspace_id: access.workspace_id,
        billing_connection_id: conn.id,
        workspace_access_id: accessId,
        product_mapping_id: mapping.id,
        provider_checkout_id: checkout.id,
        url: checkout.url,
        created_at: clock.now(),
      },
      tx,
    );
    await audit.record(
      actor,
      {
        action: 'billing_checkout.created',
        resourceType: 'billing_checkout',
        resourceId: created.id,
        workspaceId: access.workspace_id,
        changes: { workspaceAccessId: accessId, productMappingId: mapping.id, providerCheckoutId: checkout.id },
      },
      tx,
    );
    return created;
  });
  return { row, conn };
}
