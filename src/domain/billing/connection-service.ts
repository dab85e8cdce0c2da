/**
 * Billing connections (with their write-only credential and webhook secrets),
 * product mappings and hosted checkouts.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { Page, PageRequest } from '../pagination.js';
import { secretPreview, type SecretBox } from '../security/secret-box.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { BillingConnectionRow, BillingRepo, CheckoutRow, ProductMappingRow } from './billing-repo.js';
import { credentialAad, credentialModeMismatch, webhookSecretAad } from './billing-secrets.js';
import { ProviderError, type BillingKind, type BillingMode, type BillingProvider, type BillingProviderClient } from './billing-types.js';

export interface CreateBillingConnectionInput {
  name: string;
  provider: BillingProvider;
  kind: BillingKind;
  mode: BillingMode;
  credential?: string | undefined;
  webhookSecret?: string | undefined;
}

export interface CreateMappingInput {
  externalProductId: string;
  externalPriceId?: string | undefined;
  planId: string;
  checkoutEnabled?: boolean | undefined;
}

export interface CheckoutInput {
  billingConnectionId: string;
  productMappingId: string;
  successUrl?: string | undefined;
  cancelUrl?: string | undefined;
  customerEmail?: string | undefined;
}

export function createConnectionService(deps: {
  db: Db;
  repo: BillingRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  secretBox: SecretBox;
  clock: Clock;
  /** How long a rotated-out webhook secret still verifies. */
  webhookSecretOverlapMs: number;
  clientFor: (conn: BillingConnectionRow) => BillingProviderClient | null;
}) {
  const { db, repo, workspaces, audit, secretBox, clock } = deps;

  function visible(actor: Actor, row: BillingConnectionRow | undefined): BillingConnectionRow {
    if (!row) throw new AppError('billing_connection_not_found', 'Billing connection not found');
    assertVisible(actor, row.workspace_id, 'billing_connection_not_found', 'Billing connection');
    return row;
  }

  async function visibleConnection(actor: Actor, id: string, q: Queryable = db): Promise<BillingConnectionRow> {
    return visible(actor, await repo.findConnection(id, q));
  }

  /** Locks a connection for a change: visible, its workspace writable. */
  async function writableConnection(actor: Actor, id: string, tx: Queryable): Promise<BillingConnectionRow> {
    const row = visible(actor, await repo.findConnectionForUpdate(id, tx));
    await workspaces.requireWritable(actor, row.workspace_id, tx);
    return row;
  }

  function requireActive(row: BillingConnectionRow): void {
    if (row.status !== 'ACTIVE') {
      throw new AppError('billing_connection_disabled', 'The billing connection is disabled', { current_status: row.status });
    }
  }

  function sealCredential(row: Pick<BillingConnectionRow, 'id' | 'provider' | 'mode'>, credential: string): Partial<BillingConnectionRow> {
    if (credentialModeMismatch(row.provider, row.mode, credential)) {
      throw new AppError('invalid_parameter', `The credential belongs to the other mode than the connection's ${row.mode}`, {
        param: 'credential',
      });
    }
    const sealed = secretBox.seal(credential, credentialAad(row.id));
    return {
      credential_ciphertext: sealed.ciphertext,
      credential_key_id: sealed.keyId,
      credential_preview: secretPreview(credential),
      credential_verification_status: 'UNVERIFIED',
      last_verification_error: null,
      external_account_id: null,
    };
  }

  function sealWebhookSecret(id: string, secret: string): Partial<BillingConnectionRow> {
    const sealed = secretBox.seal(secret, webhookSecretAad(id));
    return { webhook_secret_ciphertext: sealed.ciphertext, webhook_secret_key_id: sealed.keyId };
  }

  async function checkPlan(workspaceId: string, planId: string, q: Queryable): Promise<void> {
    const plan = await repo.findPlan(planId, q);
    if (!plan || plan.workspace_id !== workspaceId)
      throw new AppError('plan_not_found', 'Plan not found in this workspace', { param: 'planId' });
    if (plan.status === 'ARCHIVED')
      throw new AppError('plan_not_active', 'The plan is archived', { param: 'planId', current_status: plan.status });
  }

  return {
    visibleConnection,

    async create(actor: Actor, workspaceId: string, dto: CreateBillingConnectionInput): Promise<BillingConnectionRow> {
      return db.transaction(async (tx) => {
        await workspaces.requireWritable(actor, workspaceId, tx);
        const now = clock.now();
        const id = newId();
        const base = { id, provider: dto.provider, mode: dto.mode };
        const row = await repo.insertConnection(
          {
            id,
            workspace_id: workspaceId,
            name: dto.name,
            provider: dto.provider,
            kind: dto.kind,
            mode: dto.mode,
            status: 'ACTIVE',
            credential_ciphertext: null,
            credential_key_id: null,
            credential_preview: null,
            credential_verification_status: 'NOT_CONFIGURED',
            last_verification_error: null,
            last_verified_at: null,
            external_account_id: null,
            webhook_secret_ciphertext: null,
            webhook_secret_key_id: null,
            previous_webhook_secret_ciphertext: null,
            previous_webhook_secret_key_id: null,
            previous_webhook_secret_expires_at: null,
            created_at: now,
            updated_at: now,
            disabled_at: null,
            ...(dto.credential ? sealCredential(base, dto.credential) : {}),
            ...(dto.webhookSecret ? sealWebhookSecret(id, dto.webhookSecret) : {}),
          },
          tx,
        );
        await audit.record(
          actor,
          {
            action: 'billing_connection.created',
            resourceType: 'billing_connection',
            resourceId: id,
            workspaceId,
            changes: { ...dto },
          },
          tx,
        );
        return row;
      });
    },

    async list(
      actor: Actor,
      workspaceId: string,
      filter: PageRequest & { status?: string | undefined },
    ): Promise<Page<BillingConnectionRow>> {
      await workspaces.get(actor, workspaceId);
      return repo.listConnections({ ...filter, workspaceId });
    },

    async disable(actor: Actor, id: string): Promise<void> {
      await db.transaction(async (tx) => {
        const row = await writableConnection(actor, id, tx);
        if (row.status === 'DISABLED') return;
        const now = clock.now();
        await repo.updateConnection(id, { status: 'DISABLED', disabled_at: now, updated_at: now }, tx);
        await audit.record(
          actor,
          {
            action: 'billing_connection.disabled',
            resourceType: 'billing_connection',
            resourceId: id,
            workspaceId: row.workspace_id,
            changes: { status: 'DISABLED' },
          },
          tx,
        );
      });
    },

    async configureCredential(actor: Actor, id: string, credential: string): Promise<BillingConnectionRow> {
      return db.transaction(async (tx) => {
        const row = await writableConnection(actor, id, tx);
        requireActive(row);
        const updated = await repo.updateConnection(id, { ...sealCredential(row, credential), updated_at: clock.now() }, tx);
        await audit.record(
          actor,
          {
            action: row.credential_ciphertext ? 'billing_connection.credential_rotated' : 'billing_connection.credential_configured',
            resourceType: 'billing_connection',
            resourceId: id,
            workspaceId: row.workspace_id,
            changes: { credential: credential, credentialPreview: updated.credential_preview },
          },
          tx,
        );
        return updated;
      });
    },

    /** Stores or rotates the webhook secret; the previous one verifies for the overlap window. */
    async configureWebhookSecret(actor: Actor, id: string, secret: string): Promise<BillingConnectionRow> {
      return db.transaction(async (tx) => {
        const row = await writableConnection(actor, id, tx);
        requireActive(row);
        const now = clock.now();
        const rotation: Partial<BillingConnectionRow> = row.webhook_secret_ciphertext
          ? {
              previous_webhook_secret_ciphertext: row.webhook_secret_ciphertext,
              previous_webhook_secret_key_id: row.webhook_secret_key_id,
              previous_webhook_secret_expires_at: new Date(now.getTime() + deps.webhookSecretOverlapMs),
            }
          : {};
        const updated = await repo.updateConnection(id, { ...sealWebhookSecret(id, secret), ...rotation, updated_at: now }, tx);
        await audit.record(
          actor,
          {
            action: row.webhook_secret_ciphertext
              ? 'billing_connection.webhook_secret_rotated'
              : 'billing_connection.webhook_secret_configured',
            resourceType: 'billing_connection',
            resourceId: id,
            workspaceId: row.workspace_id,
            changes: {
              webhookSecret: secret,
              ...(rotation.previous_webhook_secret_expires_at
                ? { previousSecretValidUntil: rotation.previous_webhook_secret_expires_at.toISOString() }
                : {}),
            },
          },
          tx,
        );
        return updated;
      });
    },

    /** Calls the provider with the credential and records the outcome (VERIFIED or FAILED). */
    async verify(actor: Actor, id: string): Promise<BillingConnectionRow> {
      const row = await visibleConnection(actor, id);
      await workspaces.requireWritableBeforeCall(actor, row.workspace_id);
      requireActive(row);
      const client = deps.clientFor(row);
      if (!client) throw new AppError('billing_not_configured', 'The connection has no provider credential', { param: 'credential' });
      let outcome: Partial<BillingConnectionRow>;
      try {
        const { externalAccountId } = await client.verify();
        outcome = { credential_verification_status: 'VERIFIED', last_verification_error: null, external_account_id: externalAccountId };
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        outcome = {
          credential_verification_status: 'FAILED',
          last_verification_error:
            err.kind === 'auth' ? 'credential_rejected' : err.kind === 'unavailable' ? 'provider_unreachable' : 'provider_refused',
        };
      }
      return db.transaction(async (tx) => {
        const current = await writableConnection(actor, id, tx);
        // A credential rotated while we were asking the provider: this outcome is about the old one.
        if (current.credential_ciphertext !== row.credential_ciphertext) return current;
        const now = clock.now();
        const updated = await repo.updateConnection(id, { ...outcome, last_verified_at: now, updated_at: now }, tx);
        await audit.record(
          actor,
          {
            action: 'billing_connection.verified',
            resourceType: 'billing_connection',
            resourceId: id,
            workspaceId: row.workspace_id,
            changes: { credentialVerificationStatus: outcome.credential_verification_status, error: outcome.last_verification_error },
          },
          tx,
        );
        return updated;
      });
    },

    async createMapping(actor: Actor, connectionId: string, dto: CreateMappingInput): Promise<ProductMappingRow> {
      if (dto.checkoutEnabled && !dto.externalPriceId) {
        throw new AppError('invalid_parameter', 'checkoutEnabled needs externalPriceId: checkouts sell a price', {
          param: 'externalPriceId',
        });
      }
      return db.transaction(async (tx) => {
        const conn = await writableConnection(actor, connectionId, tx);
        requireActive(conn);
        await checkPlan(conn.workspace_id, dto.planId, tx);
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
    },

    async listMappings(
      actor: Actor,
      connectionId: string,
      filter: PageRequest & { status?: string | undefined },
    ): Promise<Page<ProductMappingRow>> {
      await visibleConnection(actor, connectionId);
      return repo.listMappings({ ...filter, connectionId });
    },

    async disableMapping(actor: Actor, mappingId: string): Promise<void> {
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
    },

    /**
     * A provider-hosted subscription checkout for the access; the Idempotency-Key goes on to the provider.
     * Every refusal comes before the provider is asked: a refused request leaves no session there.
     */
    async createCheckout(
      actor: Actor,
      accessId: string,
      dto: CheckoutInput,
      idempotencyKey: string | undefined,
    ): Promise<{ row: CheckoutRow; conn: BillingConnectionRow }> {
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
      if (access.status === 'REVOKED') {
        throw new AppError('illegal_transition', 'A REVOKED access cannot subscribe', { current_status: access.status });
      }
      const mapping = await repo.findMapping(dto.productMappingId);
      if (!mapping || mapping.billing_connection_id !== conn.id) {
        throw new AppError('product_mapping_not_found', 'Product mapping not found on this connection', { param: 'productMappingId' });
      }
      if (mapping.status !== 'ACTIVE' || !mapping.checkout_enabled || !mapping.external_price_id) {
        throw new AppError('checkout_not_available', 'The mapping is not enabled for checkout', { param: 'productMappingId' });
      }
      if (conn.provider === 'STRIPE' && !dto.successUrl) {
        throw new AppError('invalid_parameter', 'A Stripe checkout needs successUrl', { param: 'successUrl' });
      }
      const client = deps.clientFor(conn);
      if (!client)
        throw new AppError('billing_not_configured', 'The connection has no provider credential', { param: 'billingConnectionId' });
      let checkout: { id: string; url: string };
      try {
        checkout = await client.createCheckout({
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
    },
  };
}
