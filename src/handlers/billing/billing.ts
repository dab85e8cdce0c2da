import type { Request, Response } from 'express';
import type {
  ConfigureBillingProviderCredentialData,
  ConfigureBillingProviderCredentialResponses,
  ConfigureBillingWebhookSecretData,
  ConfigureBillingWebhookSecretResponses,
  CreateBillingConnectionData,
  CreateBillingConnectionResponses,
  CreateBillingProductMappingData,
  CreateBillingProductMappingResponses,
  CreateCheckoutData,
  CreateCheckoutResponses,
  DeleteBillingProductMappingData,
  DeleteBillingProductMappingResponses,
  DisableBillingConnectionData,
  DisableBillingConnectionResponses,
  ListBillingConnectionsData,
  ListBillingConnectionsResponses,
  ListBillingProductMappingsData,
  ListBillingProductMappingsResponses,
  ListBillingWebhookEventsData,
  ListBillingWebhookEventsResponses,
  ListExternalSubscriptionsData,
  ListExternalSubscriptionsResponses,
  ReceiveBillingWebhookData,
  ReceiveBillingWebhookResponses,
  ReconcileBillingConnectionData,
  ReconcileBillingConnectionResponses,
  ReplayBillingWebhookEventData,
  ReplayBillingWebhookEventResponses,
  SyncWorkspaceAccessBillingPeriodData,
  SyncWorkspaceAccessBillingPeriodResponses,
  VerifyBillingConnectionData,
  VerifyBillingConnectionResponses,
} from '../../../generated/client/types.gen.js';
import {
  toBillingConnectionDto,
  toCheckoutDto,
  toExternalSubscriptionDto,
  toPeriodSyncDto,
  toProductMappingDto,
  toWebhookEventDto,
} from './billing-mapper.js';
import type { Services } from '../../domain/services.js';
import { sendError } from '../../http/api.js';
import { created, handler, noContent, ok, page, type HandlerMap } from '../../http/handler.js';
import { listQuery, parseTimestamp } from '../../http/wire.js';
import type { RequestLocals } from '../../web/locals.js';

const header = (headers: Record<string, string | string[] | undefined>, name: string): string | undefined => {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
};

export function billingHandlers({ billing }: Services): HandlerMap {
  const { connections, inbox, reconciler, periodSync } = billing;
  // A DTO's URLs start with the public URL of the request it answers (PublicUrl.forRequest).
  const dto = (publicUrl: string) => (row: Parameters<typeof toBillingConnectionDto>[0]) => toBillingConnectionDto(row, publicUrl);

  return {
    createBillingConnection: handler<CreateBillingConnectionData, CreateBillingConnectionResponses>(
      async ({ actor, path, body, publicUrl }) => created(dto(publicUrl)(await connections.create(actor, path.workspaceId, body))),
    ),
    listBillingConnections: handler<ListBillingConnectionsData, ListBillingConnectionsResponses>(
      async ({ actor, path, query, publicUrl }) => {
        const result = await connections.list(actor, path.workspaceId, listQuery(query));
        return page(result.items.map(dto(publicUrl)), result.nextAfter);
      },
    ),
    disableBillingConnection: handler<DisableBillingConnectionData, DisableBillingConnectionResponses>(async ({ actor, path }) => {
      await connections.disable(actor, path.connectionId);
      return noContent();
    }),
    configureBillingProviderCredential: handler<ConfigureBillingProviderCredentialData, ConfigureBillingProviderCredentialResponses>(
      async ({ actor, path, body, publicUrl }) =>
        ok(dto(publicUrl)(await connections.configureCredential(actor, path.connectionId, body.credential))),
    ),
    configureBillingWebhookSecret: handler<ConfigureBillingWebhookSecretData, ConfigureBillingWebhookSecretResponses>(
      async ({ actor, path, body, publicUrl }) =>
        ok(dto(publicUrl)(await connections.configureWebhookSecret(actor, path.connectionId, body.webhookSecret))),
    ),
    verifyBillingConnection: handler<VerifyBillingConnectionData, VerifyBillingConnectionResponses>(async ({ actor, path, publicUrl }) =>
      ok(dto(publicUrl)(await connections.verify(actor, path.connectionId))),
    ),
    createBillingProductMapping: handler<CreateBillingProductMappingData, CreateBillingProductMappingResponses>(
      async ({ actor, path, body }) => created({ id: (await connections.createMapping(actor, path.connectionId, body)).id }),
    ),
    listBillingProductMappings: handler<ListBillingProductMappingsData, ListBillingProductMappingsResponses>(
      async ({ actor, path, query }) => {
        const result = await connections.listMappings(actor, path.connectionId, listQuery(query));
        return page(result.items.map(toProductMappingDto), result.nextAfter);
      },
    ),
    deleteBillingProductMapping: handler<DeleteBillingProductMappingData, DeleteBillingProductMappingResponses>(async ({ actor, path }) => {
      await connections.disableMapping(actor, path.mappingId);
      return noContent();
    }),
    createCheckout: handler<CreateCheckoutData, CreateCheckoutResponses>(async ({ actor, path, body, headers }) => {
      const { row, conn } = await connections.createCheckout(actor, path.accessId, body, header(headers, 'idempotency-key'));
      return created(toCheckoutDto(row, conn.provider));
    }),
    listBillingWebhookEvents: handler<ListBillingWebhookEventsData, ListBillingWebhookEventsResponses>(async ({ actor, path, query }) => {
      const result = await inbox.list(actor, path.connectionId, listQuery(query));
      return page(result.items.map(toWebhookEventDto), result.nextAfter);
    }),
    replayBillingWebhookEvent: handler<ReplayBillingWebhookEventData, ReplayBillingWebhookEventResponses>(async ({ actor, path }) => {
      const { operationId } = await inbox.replay(actor, path.eventId);
      return ok({ accepted: true, operationId });
    }),
    listExternalSubscriptions: handler<ListExternalSubscriptionsData, ListExternalSubscriptionsResponses>(
      async ({ actor, path, query }) => {
        const result = await billing.listExternalSubscriptions(actor, path.accessId, listQuery(query));
        return page(result.items.map(toExternalSubscriptionDto), result.nextAfter);
      },
    ),
    reconcileBillingConnection: handler<ReconcileBillingConnectionData, ReconcileBillingConnectionResponses>(async ({ actor, path }) => {
      const { runId } = await reconciler.reconcile(actor, path.connectionId);
      return ok({ accepted: true, operationId: runId });
    }),
    syncWorkspaceAccessBillingPeriod: handler<SyncWorkspaceAccessBillingPeriodData, SyncWorkspaceAccessBillingPeriodResponses>(
      async ({ actor, path, body }) => {
        const result = await periodSync.sync(actor, path.accessId, {
          ...body,
          periodStart: parseTimestamp(body.periodStart, 'periodStart'),
          periodEnd: parseTimestamp(body.periodEnd, 'periodEnd'),
          sourceUpdatedAt: parseTimestamp(body.sourceUpdatedAt, 'sourceUpdatedAt'),
        });
        return ok(toPeriodSyncDto(result.row, result.applied, result.quotaGranted));
      },
    ),
    // Reached only if the raw-body route in app.ts did not take the request: a body that
    // was parsed and re-serialized no longer carries the provider's signature, so the
    // receiver refuses it unless the bytes happen to be identical.
    receiveBillingWebhook: handler<ReceiveBillingWebhookData, ReceiveBillingWebhookResponses>(async ({ path, body, headers }) => {
      const raw = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body ?? null));
      return ok(await inbox.receive(path.connectionId, raw, headers));
    }),
  };
}

/**
 * The public webhook endpoint (`POST /webhooks/billing/{connectionId}`), on the raw body.
 * It never logs the body or the signature header.
 */
export function billingWebhookReceiver({ billing }: Services) {
  return async (req: Request, res: Response) => {
    (res.locals as RequestLocals).operationId = 'receiveBillingWebhook';
    try {
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const ack = await billing.inbox.receive(String(req.params.connectionId), raw, req.headers);
      res.status(200).json(ack);
    } catch (err) {
      sendError(req, res, err);
    }
  };
}
