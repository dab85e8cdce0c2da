/**
 * The classes of the paths a protocol does not meter (its table's `passthrough` field): what a workspace or a plan
 * lets through unmetered, class by class (`passthroughClasses`), instead of every path at once. A path the
 * protocol neither meters nor governs as free is of one class: that of the pattern of its table that matches it
 * earliest in the path (the resource an upstream routes it by: `v1/vector_stores/{id}/files` is a vector store's,
 * `v1/files/{id}` a file's), the first listed on a tie; none matches: `other`.
 *
 * A class let through is forwarded uncharged by quota, on the connection's provider account, which every end
 * user of the workspace shares: what one user makes there (a file, a batch, a stored response) another can list,
 * read or delete. Each class says what letting it through opens (PASSTHROUGH_CLASSES), for the 409 that refuses
 * it and for the docs. The contract's PassthroughClass lists the same names (test/protocols/passthrough.test.ts).
 */

/** Each class and what letting it through opens, in the contract's order; `other` last. */
export const PASSTHROUGH_CLASSES = {
  files: 'files stored at the provider: uploaded, listed, downloaded and deleted',
  uploads: 'large uploads in parts, which become files stored at the provider',
  batches: 'batch jobs: model calls the provider runs later and bills, none of them charged to quota',
  fine_tuning: 'fine-tuning jobs: training the provider bills, and the tuned models',
  assistants: 'assistants and threads, whose runs call models the provider bills, none of them charged to quota',
  vector_stores: 'vector stores and file search stores: storage and indexing the provider bills',
  containers: 'code interpreter containers and their files, billed per session',
  evals: 'evals, whose runs call models the provider bills, none of them charged to quota',
  stored_responses: 'stored responses, chat completions and conversations: read, listed, changed and deleted',
  realtime_client_secrets:
    'ephemeral keys and WebRTC calls of Realtime sessions, which then talk to the provider directly: such a session bypasses Nexus entirely (no quota, no rate limit, no record)',
  videos: 'video generation the provider bills per second, none of it charged to quota',
  images: 'image generation this protocol does not meter (Imagen), billed by the provider, none of it charged to quota',
  cached_contents: 'context caches the provider bills for each hour they are stored',
  async_invoke: 'asynchronous invocations (video and other long jobs) the provider bills, none of them charged to quota',
  guardrails: 'guardrail checks the provider bills per text unit',
  other: "any other path of the provider's API, model calls Nexus does not meter among them",
} as const;

/**
 * Where a realtime session is metered instead, by protocolProfile (docs/realtime.md): what the 409 refusing an
 * ephemeral key (`realtime_client_secrets`) points to.
 */
export const METERED_SESSIONS: Readonly<Record<string, string>> = {
  openai: 'A Realtime session is metered when it is opened through Nexus: a WebSocket to GET v1/realtime?model=... with the inference key',
  'azure-openai':
    'A Realtime session is metered when it is opened through Nexus: a WebSocket to GET v1/realtime?model=... with the inference key',
  gemini:
    'A Live session is metered when it is opened through Nexus: a WebSocket to ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent with the inference key',
};

/** A class of unmetered paths (the contract's PassthroughClass). */
export type PassthroughClass = keyof typeof PASSTHROUGH_CLASSES;

/** Every class, in the contract's order. */
export const PASSTHROUGH_CLASS_NAMES: readonly PassthroughClass[] = Object.freeze(Object.keys(PASSTHROUGH_CLASSES) as PassthroughClass[]);

/** Whether a string names a class. */
export const isPassthroughClass = (value: unknown): value is PassthroughClass =>
  typeof value === 'string' && Object.hasOwn(PASSTHROUGH_CLASSES, value);

/** A row of a protocol's `passthrough` table: a pattern (matched anywhere in the route, case-insensitive) and its class. */
export type PassthroughRoute = readonly [pattern: RegExp, passthroughClass: PassthroughClass];

/**
 * A pattern of the resource `name` (a path segment, or several, as a pattern) after `prefix`: by default wherever the
 * route has it, `(^|/)name(/|$)`.
 */
export const resource = (name: string, prefix = '(?:^|\\/)'): RegExp => new RegExp(`${prefix}${name}(?:\\/|$)`, 'i');

/** The class of an unmetered route by `rows`: the row whose pattern matches earliest in it (the first on a tie), else `other`. */
export function passthroughClassOf(rows: readonly PassthroughRoute[], route: string): PassthroughClass {
  let found: PassthroughClass = 'other';
  let at = Infinity;
  for (const [pattern, name] of rows) {
    const match = pattern.exec(route);
    if (match && match.index < at) {
      at = match.index;
      found = name;
    }
  }
  return found;
}
