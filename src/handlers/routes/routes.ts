import type {
  ArchiveRouteData,
  ArchiveRouteResponses,
  CreateRouteData,
  CreateRouteResponses,
  GetRouteData,
  GetRouteHealthData,
  GetRouteHealthResponses,
  GetRouteResponses,
  ListRoutesData,
  ListRoutesResponses,
  UpdateRouteData,
  UpdateRouteResponses,
} from '../../../generated/client/types.gen.js';
import type { Services } from '../../domain/services.js';
import { created, handler, noContent, ok, page, type HandlerMap } from '../../http/handler.js';
import { listQuery } from '../../http/wire.js';
import { toRouteDto, toRouteHealthDto } from './route-mapper.js';

export function routeHandlers({ routes }: Services): HandlerMap {
  const dto = (publicUrl: string) => (row: Parameters<typeof toRouteDto>[0]) => toRouteDto(row, publicUrl);
  return {
    createRoute: handler<CreateRouteData, CreateRouteResponses>(async ({ actor, path, body, publicUrl }) =>
      created(dto(publicUrl)(await routes.create(actor, path.workspaceId, body))),
    ),
    listRoutes: handler<ListRoutesData, ListRoutesResponses>(async ({ actor, path, query, publicUrl }) => {
      const result = await routes.list(actor, path.workspaceId, listQuery(query ?? {}));
      return page(result.items.map(dto(publicUrl)), result.nextAfter);
    }),
    getRoute: handler<GetRouteData, GetRouteResponses>(async ({ actor, path, publicUrl }) =>
      ok(dto(publicUrl)(await routes.get(actor, path.routeId))),
    ),
    updateRoute: handler<UpdateRouteData, UpdateRouteResponses>(async ({ actor, path, body, publicUrl }) =>
      ok(dto(publicUrl)(await routes.update(actor, path.routeId, body))),
    ),
    archiveRoute: handler<ArchiveRouteData, ArchiveRouteResponses>(async ({ actor, path }) => {
      await routes.archive(actor, path.routeId);
      return noContent();
    }),
    getRouteHealth: handler<GetRouteHealthData, GetRouteHealthResponses>(async ({ actor, path }) =>
      ok(toRouteHealthDto(await routes.health(actor, path.routeId))),
    ),
  };
}
