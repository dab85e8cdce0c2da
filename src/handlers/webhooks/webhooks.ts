import type {
  CreateWebhookEndpointData,
  CreateWebhookEndpointResponses,
  DeleteWebhookEndpointData,
  DeleteWebhookEndpointResponses,
  DisableWebhookEndpointData,
  DisableWebhookEndpointResponses,
  GetWebhookEndpointData,
  GetWebhookEndpointResponses,
  GetWebhookMessageData,
  GetWebhookMessageResponses,
  ListWebhookEndpointsData,
  ListWebhookEndpointsResponses,
  ListWebhookMessagesData,
  ListWebhookMessagesResponses,
  ReplayFailedWebhookMessagesData,
  ReplayFailedWebhookMessagesResponses,
  ReplayWebhookMessageData,
  ReplayWebhookMessageResponses,
  RotateWebhookEndpointSecretData,
  RotateWebhookEndpointSecretResponses,
  SendTestWebhookEventData,
  SendTestWebhookEventResponses,
  UpdateWebhookEndpointData,
  UpdateWebhookEndpointResponses,
} from '../../../generated/client/types.gen.js';
import type { Services } from '../../domain/services.js';
import { created, handler, noContent, ok, page, type HandlerMap } from '../../http/handler.js';
import { listQuery, parseTimestamp } from '../../http/wire.js';
import { toWebhookEndpointDto, toWebhookMessageDto } from './webhook-mapper.js';

export function webhookHandlers({ webhooks }: Services): HandlerMap {
  return {
    createWebhookEndpoint: handler<CreateWebhookEndpointData, CreateWebhookEndpointResponses>(async ({ actor, path, body }) => {
      const { endpoint, secret } = await webhooks.create(actor, path.workspaceId, body);
      return created({ ...toWebhookEndpointDto(endpoint), secret });
    }),
    listWebhookEndpoints: handler<ListWebhookEndpointsData, ListWebhookEndpointsResponses>(async ({ actor, path, query }) => {
      const result = await webhooks.list(actor, path.workspaceId, listQuery(query ?? {}));
      return page(result.items.map(toWebhookEndpointDto), result.nextAfter);
    }),
    getWebhookEndpoint: handler<GetWebhookEndpointData, GetWebhookEndpointResponses>(async ({ actor, path }) =>
      ok(toWebhookEndpointDto(await webhooks.get(actor, path.webhookEndpointId))),
    ),
    updateWebhookEndpoint: handler<UpdateWebhookEndpointData, UpdateWebhookEndpointResponses>(async ({ actor, path, body }) =>
      ok(toWebhookEndpointDto(await webhooks.update(actor, path.webhookEndpointId, body))),
    ),
    disableWebhookEndpoint: handler<DisableWebhookEndpointData, DisableWebhookEndpointResponses>(async ({ actor, path }) =>
      ok(toWebhookEndpointDto(await webhooks.disable(actor, path.webhookEndpointId))),
    ),
    deleteWebhookEndpoint: handler<DeleteWebhookEndpointData, DeleteWebhookEndpointResponses>(async ({ actor, path }) => {
      await webhooks.delete(actor, path.webhookEndpointId);
      return noContent();
    }),
    rotateWebhookEndpointSecret: handler<RotateWebhookEndpointSecretData, RotateWebhookEndpointSecretResponses>(async ({ actor, path }) => {
      const { endpoint, secret } = await webhooks.rotateSecret(actor, path.webhookEndpointId);
      return ok({ ...toWebhookEndpointDto(endpoint), secret });
    }),
    sendTestWebhookEvent: handler<SendTestWebhookEventData, SendTestWebhookEventResponses>(async ({ actor, path }) =>
      ok(toWebhookMessageDto(await webhooks.sendTest(actor, path.webhookEndpointId))),
    ),
    listWebhookMessages: handler<ListWebhookMessagesData, ListWebhookMessagesResponses>(async ({ actor, path, query }) => {
      const { status, ...rest } = query ?? {};
      const { since, ...pageRequest } = listQuery(rest);
      const result = await webhooks.listMessages(actor, path.webhookEndpointId, { status, since }, pageRequest);
      return page(result.items.map(toWebhookMessageDto), result.nextAfter);
    }),
    getWebhookMessage: handler<GetWebhookMessageData, GetWebhookMessageResponses>(async ({ actor, path }) =>
      ok(toWebhookMessageDto(await webhooks.getMessage(actor, path.webhookEndpointId, path.messageId))),
    ),
    replayWebhookMessage: handler<ReplayWebhookMessageData, ReplayWebhookMessageResponses>(async ({ actor, path }) => {
      await webhooks.replay(actor, path.webhookEndpointId, path.messageId);
      return ok({ accepted: true, operationId: path.messageId });
    }),
    replayFailedWebhookMessages: handler<ReplayFailedWebhookMessagesData, ReplayFailedWebhookMessagesResponses>(
      async ({ actor, path, body }) =>
        ok({ replayed: await webhooks.replayFailed(actor, path.webhookEndpointId, parseTimestamp(body.since, 'since')) }),
    ),
  };
}
