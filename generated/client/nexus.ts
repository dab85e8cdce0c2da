// This file is copied from scripts/client-package/nexus.ts by `npm run generate`: edit it there.

/**
 * The package's entry: the generated SDK and types, and what the generator does not make.
 *
 * - NexusError: an error answer thrown as an Error (status, code, param, requestId and the body), where
 *   the generated client throws the parsed body as it is. Installed on a client as an error interceptor.
 * - createNexusClient: a client that throws NexusErrors (the SDK's types assume calls throw) and sends
 *   the key given to it.
 * - paginate: every item of a list operation, page after page, following X-Next-Cursor.
 */
import { client } from './client.gen.js';
import { createClient, createConfig, type Client, type Config } from './client/index.js';
import type { ErrorBody } from './types.gen.js';

export * from './index.js';

/** An error answer of Nexus (any non-2xx status). */
export class NexusError extends Error {
  override readonly name = 'NexusError';
  /** The HTTP status. */
  readonly status: number;
  /** The stable cause (`workspace_not_found`, `quota_insufficient`, ...); undefined when the answer is not Nexus's Error body (a proxy's 502 page, say). */
  readonly code: string | undefined;
  /** The error's category (`not_found_error`, ...), from the body. */
  readonly type: string | undefined;
  /** The request field at fault, when there is one. */
  readonly param: string | null | undefined;
  /** The request's id (the body's `request_id`, else the `X-Request-Id` header): quote it when asking why. */
  readonly requestId: string | undefined;
  /** The answer's body: the Error body (parsed JSON) for Nexus's own answers, the text otherwise. */
  readonly body: unknown;
  readonly response: Response;

  constructor(response: Response, body: unknown) {
    const error = isErrorBody(body) ? body.error : undefined;
    super(error ? `${error.message} (${response.status} ${error.code})` : `HTTP ${response.status} ${response.statusText}`.trim());
    this.status = response.status;
    this.code = error?.code;
    this.type = error?.type;
    this.param = error?.param;
    this.requestId = error?.request_id ?? response.headers.get('x-request-id') ?? response.headers.get('x-nexus-request-id') ?? undefined;
    this.body = body;
    this.response = response;
  }
}

function isErrorBody(body: unknown): body is ErrorBody {
  const error = (body as { error?: unknown } | null)?.error as { code?: unknown; message?: unknown } | undefined;
  return typeof error === 'object' && error !== null && typeof error.code === 'string' && typeof error.message === 'string';
}

/**
 * The error interceptor: a call that throws throws a NexusError. A call made with `throwOnError: false`
 * keeps the body as its `error` (typed as the Error body), and a request that got no answer at all (a
 * refused connection) throws what fetch threw.
 */
function toNexusError(error: unknown, response: Response | undefined, _request: Request, options: { throwOnError?: boolean }): unknown {
  if (!response || !options.throwOnError) return error;
  return new NexusError(response, error);
}

/** Makes a client throw NexusErrors, as the SDK's types expect of it. */
export function withNexusErrors(target: Client): Client {
  target.setConfig({ throwOnError: true });
  if (!target.interceptors.error.exists(toNexusError)) target.interceptors.error.use(toNexusError);
  return target;
}

withNexusErrors(client);

export interface NexusClientOptions extends Omit<Config, 'auth' | 'throwOnError'> {
  /** Nexus's origin, e.g. https://nexus.example.com (with its path prefix, behind a proxy that adds one). */
  baseUrl: string;
  /** A Management Key (nx-mgmt-...), sent as `Authorization: Bearer`. */
  apiKey?: string;
}

/** A client for the Admin API that throws NexusErrors; pass it to each call as `client`. */
export function createNexusClient({ apiKey, ...config }: NexusClientOptions): Client {
  return withNexusErrors(createClient(createConfig({ ...config, ...(apiKey ? { auth: apiKey } : {}) })));
}

/** A page of a list operation, from the result type of one of the SDK's functions. */
type PageOf<TOperation> = TOperation extends (options: never) => Promise<infer R>
  ? Extract<R, { data: readonly unknown[]; response: Response }>
  : never;
/** What a list operation lists: never for an operation that does not list. */
export type ItemOf<TOperation> = PageOf<TOperation>['data'][number];
/** The options of the operation, when it is a list operation (every one takes an optional `cursor`). */
type ListOptionsOf<TOperation extends (options: never) => unknown> = [ItemOf<TOperation>] extends [never]
  ? never
  : Parameters<TOperation>[0] & { query?: { cursor?: string } };

/**
 * Every item of a list operation, fetched a page at a time: each next page is asked with the cursor of
 * the previous page's `X-Next-Cursor` header, until a page comes without one.
 *
 *   for await (const workspace of paginate(listWorkspaces, { client, query: { limit: 100 } })) ...
 */
export async function* paginate<TOperation extends (options: never) => Promise<unknown>>(
  operation: TOperation,
  options: ListOptionsOf<TOperation>,
): AsyncGenerator<ItemOf<TOperation>, void, undefined> {
  const list = operation as unknown as (options: object) => Promise<{ data: ItemOf<TOperation>[]; response: Response }>;
  const first = options as { query?: { cursor?: string } };
  let cursor = first.query?.cursor;
  for (;;) {
    const page = await list({ ...first, throwOnError: true, query: { ...first.query, cursor } });
    yield* page.data;
    cursor = page.response.headers.get('x-next-cursor') ?? undefined;
    if (!cursor) return;
  }
}
