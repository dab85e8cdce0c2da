/**
 * Billing connections (with their write-only credential and webhook secrets: connection-credentials.ts),
 * product mappings (product-mappings.ts) and hosted checkouts (checkout.ts), bound as one service.
 */
import { newId } from '../../ids.js';
import type { Actor } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { Page, PageRequest } from '../pagination.js';
import type { BillingConnectionRow } from './billing-repo.js';
import type { BillingKind, BillingMode, BillingProvider } from './billing-types.js';
import { createCheckout } from './checkout.js';
import { configureCredential, configureWebhookSecret, sealCredential, sealWebhookSecret, verify } from './connection-credentials.js';
import { visibleConnection, writableConnection, type ConnectionDeps } from './connection-lookup.js';
import { createMapping, disableMapping, listMappings } from './product-mappings.js';

interface CreateBillingConnectionInput {
  name: string;
  provider: BillingProvider;
  kind: BillingKind;
  mode: BillingMode;
  credential?: string | undefined;
  webhookSecret?: string | undefined;
}

async function create(
  deps: ConnectionDeps,
  actor: Actor,
  workspaceId: string,
  dto: CreateBillingConnectionInput,
): Promise<BillingConnectionRow> {
  const { db, repo, workspaces, audit, clock } = deps;
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
        ...(dto.credential ? sealCredential(deps, base, dto.credential) : {}),
        ...(dto.webhookSecret ? sealWebhookSecret(deps, id, dto.webhookSecret) : {}),
      },
      tx,
    );
    await audit.record(
      actor,
      { action: 'billing_connection.created', resourceType: 'billing_connection', resourceId: id, workspaceId, changes: { ...dto } },
      tx,
    );
    return row;
  });
}

async function list(
  { repo, workspaces }: ConnectionDeps,
  actor: Actor,
  workspaceId: string,
  filter: PageRequest & { status?: string | undefined },
): Promise<Page<BillingConnectionRow>> {
  await workspaces.get(actor, workspaceId);
  return repo.listConnections({ ...filter, workspaceId });
}

async function disable(deps: ConnectionDeps, actor: Actor, id: string): Promise<void> {
  const { db, repo, audit, clock } = deps;
  await db.transaction(async (tx) => {
    const row = await writableConnection(deps, actor, id, tx);
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
}

export const createConnectionService = (deps: ConnectionDeps) =>
  bindDeps(deps, {
    visibleConnection,
    create,
    list,
    disable,
    configureCredential,
    configureWebhookSecret,
    verify,
    createMapping,
    listMappings,
    disableMapping,
    createCheckout,
  });
