/**
 * The contract's gateway operations, for the admin router's completeness check.
 * Every /providers request is answered by the gateway (src/gateway/gateway.ts),
 * which the server's request listener dispatches to before express (src/app.ts);
 * openapi-backend can only match a one-segment providerPath and never sees one in
 * practice. Should a request get here, it gets the gateway's own answer for a path
 * it does not serve.
 */
import { AppError } from '../../errors.js';
import type { HandlerMap } from '../../http/handler.js';

const notServedHere = async (): Promise<never> => {
  throw new AppError('route_not_found', 'Gateway calls are served at /providers/{providerConnectionId}/{providerPath}');
};

export function gatewayHandlers(): HandlerMap {
  return {
    proxyProviderGet: notServedHere,
    proxyProviderPost: notServedHere,
    proxyProviderPut: notServedHere,
    proxyProviderPatch: notServedHere,
    proxyProviderDelete: notServedHere,
    // GET /v1/me is answered by the gateway too (src/app.ts dispatches it before express).
    getMe: notServedHere,
  };
}
