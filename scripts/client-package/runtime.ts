/**
 * What the resource client (resources.gen.ts) and createNexusClient run on:
 *
 * - the fetch that every request goes through: a timeout per attempt, and retries with exponential backoff
 *   and jitter (honouring Retry-After and x-should-retry) on 408, 429, 5xx and no answer, for requests safe to
 *   repeat: the idempotent methods (GET, HEAD, OPTIONS, PUT, DELETE), and writes that carry an Idempotency-Key;
 * - NexusPromise, the answer's data with `.withResponse()` for the Response, and PagePromise, a list's first
 *   page that is also an async iterable over every item of every page; a file (a CSV export) comes as a stream;
 * - NexusCore, the configured client the resources call through.
 */
import { createClient, createConfig, type Client } from './client/index.js';
import { NexusConfigurationError, NexusConnectionError, NexusError, NexusTimeoutError } from './errors.js';
import { greedyPathParameters, idempotentOperations } from './operations.gen.js';

/** How a client is set up. */
export interface NexusOptions {
  /** Nexus's origin, e.g. https://nexus.example.com (with its path prefix, behind a proxy that adds one). Required: there is no default. */
  baseUrl: string;
  /** A Management Key (nx-mgmt-...), or an Inference Key for the Gateway's calls; sent as `Authorization: Bearer`. */
  apiKey?: string | undefined;
  /** Retries after the first attempt, for requests safe to repeat (default 2). */
  maxRetries?: number | undefined;
  /** Milliseconds to wait for an answer's headers, per attempt (default 60 000). */
  timeout?: number | undefined;
  /** Headers sent with every request. */
  defaultHeaders?: Record<string, string> | undefined;
  /** The fetch to use (default globalThis.fetch): for a proxy agent, tracing, tests. */
  fetch?: typeof fetch | undefined;
}

type OptionalKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? K : never }[keyof T];

/**
 * A body or a query as a method takes it: its optional properties also take `undefined` (left out of the
 * request), so that `{ status: filters.status }` compiles under exactOptionalPropertyTypes.
 */
export type Params<T> = T extends object
  ? { [K in Exclude<keyof T, OptionalKeys<T>>]: T[K] } & { [K in OptionalKeys<T>]?: T[K] | undefined }
  : T;

/** What one call can change: each overrides the client's setting for this call only. */
export interface RequestOptions {
  maxRetries?: number | undefined;
  timeout?: number | undefined;
  /** The Idempotency-Key of a write; by default a new random key per call (the same on each of its retries). */
  idempotencyKey?: string | undefined;
  headers?: Record<string, string> | undefined;
  /** Aborts the call (not retried). */
  signal?: AbortSignal | undefined;
}

interface FetchSettings {
  maxRetries: number;
  timeout: number;
  fetch: typeof fetch;
}

export const DEFAULT_MAX_RETRIES = 2;
export const DEFAULT_TIMEOUT_MS = 60_000;
const INITIAL_RETRY_DELAY_MS = 500;
const MAX_RETRY_DELAY_MS = 8_000;
/** A Retry-After longer than this is not waited for: the retry waits the backoff instead. */
const MAX_RETRY_AFTER_MS = 60_000;

/** The methods that HTTP defines as idempotent: repeating one changes nothing more than sending it once. */
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** Whether an answer is worth a retry: the server's `x-should-retry` when it says, else 408, 429 and 5xx. */
function shouldRetry(response: Response): boolean {
  const says = response.headers.get('x-should-retry');
  if (says === 'true') return true;
  if (says === 'false') return false;
  return response.status === 408 || response.status === 429 || response.status >= 500;
}

/**
 * How long to wait before retry number `retry` (0 for the first): the answer's retry-after-ms, or its Retry-After
 * (seconds or an HTTP date) when that is at most 60 s; else 0.5 s doubling up to 8 s, less up to 25 % jitter.
 */
export function retryDelayMs(retry: number, response?: Response): number {
  const afterMs = Number(response?.headers.get('retry-after-ms'));
  if (Number.isFinite(afterMs) && afterMs >= 0 && response?.headers.has('retry-after-ms')) return afterMs;
  const after = response?.headers.get('retry-after');
  if (after) {
    const seconds = Number(after);
    const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(after) - Date.now();
    if (Number.isFinite(ms) && ms >= 0 && ms <= MAX_RETRY_AFTER_MS) return ms;
  }
  const backoff = Math.min(INITIAL_RETRY_DELAY_MS * 2 ** retry, MAX_RETRY_DELAY_MS);
  return backoff * (1 - Math.random() * 0.25);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A fetch with a timeout per attempt and retries. Errors with no answer become NexusConnectionError or
 * NexusTimeoutError; an abort by the caller's signal is thrown as it is and not retried.
 */
export function retryingFetch(settings: FetchSettings): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const repeatable = IDEMPOTENT_METHODS.has(request.method) || request.headers.has('idempotency-key');
    for (let attempt = 0; ; attempt++) {
      const canRetry = repeatable && attempt < settings.maxRetries;
      const timeout = new AbortController();
      const timer = setTimeout(() => timeout.abort(), settings.timeout);
      let response: Response;
      try {
        response = await settings.fetch(new Request(request.clone(), { signal: AbortSignal.any([request.signal, timeout.signal]) }));
      } catch (error) {
        if (request.signal.aborted) throw error;
        const failure = timeout.signal.aborted
          ? new NexusTimeoutError(`No answer from ${request.method} ${request.url} within ${settings.timeout} ms`, { cause: error })
          : new NexusConnectionError(`Could not reach Nexus (${request.method} ${request.url}): ${errorText(error)}`, { cause: error });
        if (!canRetry) throw failure;
        await sleep(retryDelayMs(attempt), request.signal);
        continue;
      } finally {
        clearTimeout(timer);
      }
      if (!canRetry || !shouldRetry(response)) return response;
      const delay = retryDelayMs(attempt, response);
      await response.body?.cancel();
      await sleep(delay, request.signal);
    }
  };
}

function errorText(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (typeof cause?.code === 'string') return cause.code;
  return error instanceof Error ? error.message : String(error);
}

/**
 * The error interceptor of a client: an error answer becomes a NexusError of its status's class. A call
 * made with `throwOnError: false` keeps the body as its `error`; no answer passes on what the fetch threw.
 */
function toNexusError(error: unknown, response: Response | undefined, _request: Request, options: { throwOnError?: boolean }): unknown {
  if (!response || !options.throwOnError) return error;
  return NexusError.fromResponse(response, error);
}

/**
 * The request interceptor of a client: a call of an operation that takes an Idempotency-Key gets a new
 * random one when it has none. The key is set before the retrying fetch, so each retry sends the same.
 */
function withIdempotencyKey(request: Request, options: { method?: string; url?: string }): Request {
  if (!request.headers.has('idempotency-key') && idempotentOperations.has(`${String(options.method).toUpperCase()} ${options.url}`)) {
    request.headers.set('Idempotency-Key', crypto.randomUUID());
  }
  return request;
}

/**
 * The request interceptor of a client for a path parameter whose `/` go as they are (a provider path,
 * `v1/chat/completions`): the generated SDK encodes a path parameter whole, `/` included, and Nexus refuses
 * an encoded `/`; this sends each segment encoded and the `/` between them as they are.
 */
async function withGreedyPath(request: Request, options: { method?: string; url?: string; path?: unknown }): Promise<Request> {
  const name = greedyPathParameters.get(`${String(options.method).toUpperCase()} ${options.url}`);
  const value = name === undefined ? undefined : (options.path as Record<string, unknown> | undefined)?.[name];
  if (typeof value !== 'string' || !value.includes('/')) return request;
  const url = new URL(request.url);
  const at = url.pathname.lastIndexOf(encodeURIComponent(value));
  if (at < 0) return request;
  url.pathname =
    url.pathname.slice(0, at) +
    value.split('/').map(encodeURIComponent).join('/') +
    url.pathname.slice(at + encodeURIComponent(value).length);
  const body = request.body === null ? null : await request.arrayBuffer();
  return new Request(url, { method: request.method, headers: request.headers, body, signal: request.signal, redirect: request.redirect });
}

/** Makes a hey-api client throw NexusErrors, as the SDK's types expect of it. */
export function withNexusErrors(target: Client): Client {
  target.setConfig({ throwOnError: true });
  if (!target.interceptors.error.exists(toNexusError)) target.interceptors.error.use(toNexusError);
  return target;
}

function settingsOf(options: NexusOptions): FetchSettings {
  const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
  const timeout = options.timeout ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(maxRetries) || maxRetries < 0)
    throw new NexusConfigurationError(`maxRetries must be an integer >= 0, not ${maxRetries}`);
  if (!(timeout > 0)) throw new NexusConfigurationError(`timeout must be a number of milliseconds > 0, not ${timeout}`);
  return { maxRetries, timeout, fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)) };
}

function checkBaseUrl(baseUrl: unknown): string {
  if (typeof baseUrl !== 'string' || !/^https?:\/\//.test(baseUrl)) {
    throw new NexusConfigurationError(
      `baseUrl must be Nexus's http(s) origin, e.g. https://nexus.example.com, not ${JSON.stringify(baseUrl)}: the client has no default`,
    );
  }
  return baseUrl.replace(/\/+$/, '');
}

/**
 * A client for the function-per-operation API: pass it to each call as `client`. It throws NexusErrors, sends
 * the key, gives each write that takes an Idempotency-Key one, and retries and times out as `new Nexus(...)` does.
 */
export function createNexusClient(options: NexusOptions): Client {
  const settings = settingsOf(options);
  const target = createClient(
    createConfig({
      baseUrl: checkBaseUrl(options.baseUrl),
      fetch: retryingFetch(settings),
      ...(options.apiKey === undefined ? {} : { auth: options.apiKey }),
      ...(options.defaultHeaders === undefined ? {} : { headers: options.defaultHeaders }),
    }),
  );
  target.interceptors.request.use(withIdempotencyKey);
  target.interceptors.request.use(withGreedyPath);
  return withNexusErrors(target);
}

/**
 * Makes the package's default client refuse every call with a clear error: a call of the function API
 * without `client` would otherwise go to a guessed address with no key.
 */
export function refuseUnconfigured(target: Client): void {
  target.setConfig({
    // A URL that parses (the request is built before it is fetched) and that no one can serve.
    baseUrl: 'http://nexus-client-not-configured.invalid',
    fetch: () =>
      Promise.reject(
        new NexusConfigurationError(
          'No Nexus client configured for this call: pass `client: createNexusClient({ baseUrl, apiKey })`, or use `new Nexus({ baseUrl, apiKey })`',
        ),
      ),
  });
}

/** An answer's data with the Response it came in. */
export interface WithResponse<T> {
  data: T;
  response: Response;
}

/**
 * The promise of a call: it resolves to the answer's data; `.withResponse()` gives the data and the fetch
 * Response (its headers, its status).
 */
export class NexusPromise<T> extends Promise<T> {
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  readonly #raw: Promise<WithResponse<T>>;

  constructor(raw: Promise<WithResponse<T>>) {
    super((resolve) => resolve(undefined as T));
    this.#raw = raw;
  }

  /** The data and the Response. */
  withResponse(): Promise<WithResponse<T>> {
    return this.#raw;
  }

  override then<R1 = T, R2 = never>(
    onfulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.#raw.then((r) => r.data).then(onfulfilled, onrejected);
  }
}

/** One page of a list: its items, and the way to the next page. Iterating it with `for await` yields every item from here to the last page. */
export class Page<T> implements AsyncIterable<T> {
  readonly #next: (cursor: string) => PagePromise<T>;

  constructor(
    /** The items of this page. */
    readonly data: T[],
    /** The next page's cursor (the `X-Next-Cursor` header); undefined on the last page. */
    readonly nextCursor: string | undefined,
    next: (cursor: string) => PagePromise<T>,
  ) {
    this.#next = next;
  }

  hasNextPage(): boolean {
    return this.nextCursor !== undefined;
  }

  /** The next page; a NexusConfigurationError on the last page (check hasNextPage()). */
  getNextPage(): PagePromise<T> {
    if (this.nextCursor === undefined) throw new NexusConfigurationError('This is the last page: there is no next page');
    return this.#next(this.nextCursor);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the loop walks from this page on
    let page: Page<T> = this;
    for (;;) {
      yield* page.data;
      if (!page.hasNextPage()) return;
      page = await page.getNextPage();
    }
  }
}

/** A list call: awaited, its first page; iterated with `for await`, every item of every page, a page fetched when the loop needs it. */
export class PagePromise<T> extends NexusPromise<Page<T>> implements AsyncIterable<T> {
  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    yield* await this;
  }
}

/** An operation of the function API, as the resources call it. */
export type Operation = (options: never) => Promise<unknown>;

interface CallShape {
  path?: Record<string, string>;
  query?: object | undefined;
  body?: unknown;
}

/** A configured client: the resources (generated in resources.gen.ts) call the function API through it. */
export class NexusCore {
  /** The hey-api client, for the function-per-operation API: `getWorkspace({ client: nexus.client, path })`. */
  readonly client: Client;
  readonly #options: NexusOptions;
  readonly #settings: FetchSettings;

  constructor(options: NexusOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new NexusConfigurationError('new Nexus({ baseUrl, apiKey }): the options are required, there is no default client');
    }
    this.#options = options;
    this.#settings = settingsOf(options);
    this.client = createNexusClient(options);
  }

  /** @internal A call: the data, or a NexusError. */
  _call<T>(operation: Operation, shape: CallShape, options: RequestOptions | undefined): NexusPromise<T> {
    return new NexusPromise<T>(this.#invoke<T>(operation, shape, options));
  }

  /** @internal A call whose answer is a file: its body unread, as a stream (the Response's own), or a NexusError. */
  _stream(operation: Operation, shape: CallShape, options: RequestOptions | undefined): NexusPromise<ReadableStream<Uint8Array>> {
    const raw = this.#invoke<ReadableStream<Uint8Array> | null>(operation, shape, options, 'stream').then(({ data, response }) => ({
      data: data ?? new ReadableStream<Uint8Array>({ start: (controller) => controller.close() }),
      response,
    }));
    return new NexusPromise(raw);
  }

  /** @internal A list call: its first page, iterable over every item (each next page asked with the previous one's X-Next-Cursor). */
  _list<T>(operation: Operation, shape: CallShape, options: RequestOptions | undefined): PagePromise<T> {
    const pageAt = (cursor: string | undefined): PagePromise<T> => {
      const query = { ...shape.query, ...(cursor === undefined ? {} : { cursor }) };
      const raw = this.#invoke<T[]>(operation, { ...shape, query }, options).then(({ data, response }) => ({
        data: new Page<T>(data, response.headers.get('x-next-cursor') ?? undefined, pageAt),
        response,
      }));
      return new PagePromise<T>(raw);
    };
    return pageAt((shape.query as { cursor?: string } | undefined)?.cursor);
  }

  async #invoke<T>(
    operation: Operation,
    shape: CallShape,
    options: RequestOptions | undefined,
    parseAs?: 'stream',
  ): Promise<WithResponse<T>> {
    // The client's request interceptor gives a write that takes an Idempotency-Key a new one when none is set here.
    const headers: Record<string, string> = { ...options?.headers };
    if (options?.idempotencyKey !== undefined) headers['Idempotency-Key'] = options.idempotencyKey;
    const call: Record<string, unknown> = { client: this.client, headers, throwOnError: true };
    if (shape.path) call.path = shape.path;
    if (shape.query !== undefined) call.query = shape.query;
    if (shape.body !== undefined) call.body = shape.body;
    if (options?.signal) call.signal = options.signal;
    if (parseAs) call.parseAs = parseAs;
    if (options?.maxRetries !== undefined || options?.timeout !== undefined) {
      call.fetch = retryingFetch({
        ...this.#settings,
        ...settingsOf({ ...this.#options, ...stripUndefined({ maxRetries: options.maxRetries, timeout: options.timeout }) }),
      });
    }
    const { data, response } = (await (operation as unknown as (o: object) => Promise<{ data: T; response: Response }>)(call)) ?? {};
    return { data: data as T, response: response as Response };
  }
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** A group of operations (one tag of the contract), called through its client. */
export class NexusResource {
  /** @internal */
  protected readonly _core: NexusCore;

  constructor(core: NexusCore) {
    this._core = core;
  }
}
