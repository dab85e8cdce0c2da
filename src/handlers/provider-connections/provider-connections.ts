import type {
  ArchiveProviderConnectionData,
  ArchiveProviderConnectionResponses,
  CreateProviderConnectionData,
  CreateProviderConnectionResponses,
  GetProviderConnectionData,
  GetProviderConnectionHealthData,
  GetProviderConnectionHealthResponses,
  GetProviderConnectionResponses,
  ListProviderConnectionsData,
  ListProviderConnectionsResponses,
  RotateProviderSecretData,
  RotateProviderSecretResponses,
  TestProviderConnectionData,
  TestProviderConnectionResponses,
  UpdateProviderConnectionData,
  UpdateProviderConnectionResponses,
  VerifyProviderConnectionData,
  VerifyProviderConnectionResponses,
} from '../../../generated/client/types.gen.js';
import type { Services } from '../../domain/services.js';
import { toProviderCheckResultDto, toProviderConnectionDto, toProviderConnectionHealthDto } from './provider-connection-mapper.js';
import { created, handler, noContent, ok, page, type HandlerMap } from '../../http/handler.js';
import { listQuery } from '../../http/wire.js';

export function providerConnectionHandlers({ providerConnections }: Services): HandlerMap {
  // A DTO's URLs start with the public URL of the request it answers (PublicUrl.forRequest).
  const dto = (publicUrl: string) => (row: Parameters<typeof toProviderConnectionDto>[0]) => toProviderConnectionDto(row, publicUrl);
  return {
    createProviderConnection: handler<CreateProviderConnectionData, CreateProviderConnectionResponses>(
      async ({ actor, path, body, publicUrl }) => created(dto(publicUrl)(await providerConnections.create(actor, path.workspaceId, body))),
    ),
    listProviderConnections: handler<ListProviderConnectionsData, ListProviderConnectionsResponses>(
      async ({ actor, path, query, publicUrl }) => {
        const result = await providerConnections.list(actor, path.workspaceId, listQuery(query));
        return page(result.items.map(dto(publicUrl)), result.nextAfter);
      },
    ),
    testProviderConnection: handler<TestProviderConnectionData, TestProviderConnectionResponses>(async ({ actor, path, body }) =>
      ok(toProviderCheckResultDto(await providerConnections.test(actor, path.workspaceId, body))),
    ),
    getProviderConnection: handler<GetProviderConnectionData, GetProviderConnectionResponses>(async ({ actor, path, publicUrl }) =>
      ok(dto(publicUrl)(await providerConnections.get(actor, path.providerConnectionId))),
    ),
    updateProviderConnection: handler<UpdateProviderConnectionData, UpdateProviderConnectionResponses>(
      async ({ actor, path, body, publicUrl }) =>
        ok(dto(publicUrl)(await providerConnections.update(actor, path.providerConnectionId, body))),
    ),
    archiveProviderConnection: handler<ArchiveProviderConnectionData, ArchiveProviderConnectionResponses>(async ({ actor, path }) => {
      await providerConnections.archive(actor, path.providerConnectionId);
      return noContent();
    }),
    verifyProviderConnection: handler<VerifyProviderConnectionData, VerifyProviderConnectionResponses>(async ({ actor, path }) =>
      ok(toProviderCheckResultDto(await providerConnections.verify(actor, path.providerConnectionId))),
    ),
    getProviderConnectionHealth: handler<GetProviderConnectionHealthData, GetProviderConnectionHealthResponses>(async ({ actor, path }) =>
      ok(toProviderConnectionHealthDto(await providerConnections.health(actor, path.providerConnectionId))),
    ),
    rotateProviderSecret: handler<RotateProviderSecretData, RotateProviderSecretResponses>(async ({ actor, path, body, publicUrl }) =>
      ok(dto(publicUrl)(await providerConnections.rotateSecret(actor, path.providerConnectionId, body))),
    ),
  };
}
