/**
 * Generates the client package's resource API (generated/client/resources.gen.ts) and its error codes
 * (generated/client/codes.gen.ts) from the bundled contract, for scripts/client-package.ts.
 *
 * Names come from the contract, never by hand:
 * - a resource per tag, named by the tag in camelCase ("Provider connections" -> `nexus.providerConnections`);
 * - a method per operation, named by its operationId less the tag's noun when it follows the verb
 *   (`createProviderConnection` -> `providerConnections.create`, `listPlanStrategies` -> `plans.listStrategies`,
 *   `getWorkspaceAccessQuota` -> `workspaceAccesses.getQuota`); an operationId without it keeps its name.
 * A method takes the path parameters in the order of the path, then the body or the query, then RequestOptions.
 * operations.gen.ts lists the operations that take an Idempotency-Key, for the client to add one to each call.
 * A list (an operation that takes the Cursor parameter) returns a PagePromise; an operation that answers a file (a CSV
 * export) returns its body unread, as a stream. Two operations of one tag that would get one name fail the generation.
 */

interface Parameter {
  $ref?: string;
  name?: string;
  in?: string;
  required?: boolean;
  'x-greedy'?: boolean;
}

interface OperationObject {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean };
  responses?: Record<string, { $ref?: string; content?: Record<string, unknown> }>;
}

export interface Contract {
  info: { version: string };
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, unknown>>;
  components: {
    parameters?: Record<string, Parameter>;
    responses?: Record<string, { content?: Record<string, unknown> }>;
    schemas: Record<string, unknown>;
  };
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/**
 * The hand-written members of a resource, by tag: its class extends this class of scripts/client-package/ (itself a
 * NexusResource) instead of NexusResource. `nexus.webhooks.verify()` checks a delivery's signature.
 */
const RESOURCE_BASES: Record<string, { name: string; module: string; members: string[] }> = {
  Webhooks: { name: 'WebhookVerifier', module: './webhooks.js', members: ['verify'] },
};

/** "Workspace accesses" -> ['Workspace', 'Accesses']. */
function words(phrase: string): string[] {
  return phrase
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1));
}

/** createProviderConnection -> ['create', 'Provider', 'Connection']. */
function camelWords(identifier: string): string[] {
  return identifier.match(/[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])/g) ?? [identifier];
}

function singular(word: string): string {
  if (/sses$/i.test(word)) return word.slice(0, -2);
  if (/ies$/i.test(word)) return word.slice(0, -3) + 'y';
  if (/[^s]s$/i.test(word)) return word.slice(0, -1);
  return word;
}

function lowerFirst(text: string): string {
  return text[0]!.toLowerCase() + text.slice(1);
}

/** The method name of an operation in its tag's resource. */
export function methodName(operationId: string, tag: string): string {
  const tagWords = words(tag);
  const last = tagWords.slice(-1);
  const candidates = [tagWords, [...tagWords.slice(0, -1), singular(last[0]!)], last, [singular(last[0]!)]];
  const parts = camelWords(operationId);
  for (const candidate of candidates) {
    const run = parts.slice(1, 1 + candidate.length);
    if (run.length === candidate.length && run.every((w, i) => w.toLowerCase() === candidate[i]!.toLowerCase())) {
      return lowerFirst([parts[0]!, ...parts.slice(1 + candidate.length)].join(''));
    }
  }
  return operationId;
}

function pascal(identifier: string): string {
  return identifier[0]!.toUpperCase() + identifier.slice(1);
}

function docComment(lines: (string | undefined)[], indent: string): string {
  const text = lines
    .filter((l): l is string => Boolean(l?.trim()))
    .map((l) => l.trim())
    .join('\n\n')
    .replaceAll('*/', '*\\/');
  return `${indent}/**\n${text
    .split('\n')
    .map((l) => `${indent} *${l ? ' ' + l : ''}`)
    .join('\n')}\n${indent} */\n`;
}

interface Method {
  name: string;
  source: string;
}

function resolveParameter(contract: Contract, parameter: Parameter): Parameter {
  if (!parameter.$ref) return parameter;
  const name = parameter.$ref.split('/').pop()!;
  return { ...contract.components.parameters?.[name], $ref: parameter.$ref };
}

/** Whether an operation's answer is a file (its 2xx answers have a body, none of it JSON: a CSV export), to be read as a stream. */
function answersAFile(contract: Contract, op: OperationObject): boolean {
  const types = Object.entries(op.responses ?? {})
    .filter(([status]) => status.startsWith('2'))
    .flatMap(([, answer]) => {
      const resolved = answer.$ref ? contract.components.responses?.[answer.$ref.split('/').pop()!] : answer;
      return Object.keys(resolved?.content ?? {});
    });
  return types.length > 0 && !types.some((type) => type === 'application/json');
}

function methodSource(
  contract: Contract,
  path: string,
  httpMethod: string,
  op: OperationObject,
  shared: Parameter[],
  name: string,
): string {
  const id = op.operationId!;
  const typeName = pascal(id);
  const parameters = [...shared, ...(op.parameters ?? [])].map((p) => resolveParameter(contract, p));
  const pathParams = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  const queryParams = parameters.filter((p) => p.in === 'query');
  const isList = parameters.some((p) => p.$ref === '#/components/parameters/Cursor');
  for (const reserved of ['body', 'query', 'options']) {
    if (pathParams.includes(reserved))
      throw new Error(`${id}: a path parameter named ${reserved} clashes with the method's own parameters`);
  }

  const args = pathParams.map((p) => `${p}: string`);
  const shape: string[] = [];
  if (pathParams.length) shape.push(`path: { ${pathParams.join(', ')} }`);
  if (op.requestBody) {
    args.push(
      op.requestBody.required ? `body: Params<NonNullable<types.${typeName}Data['body']>>` : `body?: Params<types.${typeName}Data['body']>`,
    );
    shape.push('body');
  }
  if (queryParams.length) {
    args.push(
      queryParams.some((p) => p.required)
        ? `query: Params<NonNullable<types.${typeName}Data['query']>>`
        : `query?: Params<types.${typeName}Data['query']>`,
    );
    shape.push('query');
  }
  args.push('options?: RequestOptions');

  const file = answersAFile(contract, op);
  const doc = docComment(
    [
      op.summary,
      op.description,
      file
        ? 'Resolves to the body as a stream, unread: pipe it, or read it with `new Response(stream).text()`. `.withResponse()` gives the Response with it.'
        : undefined,
      `\`${httpMethod.toUpperCase()} ${path}\` (\`${id}\` in the function API)`,
    ],
    '  ',
  );
  if (isList) {
    const item = `types.${typeName}Responses[200][number]`;
    return `${doc}  ${name}(${args.join(', ')}): PagePromise<${item}> {\n    return this._core._list<${item}>(sdk.${id}, { ${shape.join(', ')} }, options);\n  }\n`;
  }
  if (file) {
    return `${doc}  ${name}(${args.join(', ')}): NexusPromise<ReadableStream<Uint8Array>> {\n    return this._core._stream(sdk.${id}, { ${shape.join(', ')} }, options);\n  }\n`;
  }
  const result = `types.${typeName}Responses[keyof types.${typeName}Responses]`;
  return `${doc}  ${name}(${args.join(', ')}): NexusPromise<${result}> {\n    return this._core._call<${result}>(sdk.${id}, { ${shape.join(', ')} }, options);\n  }\n`;
}

/** generated/client/resources.gen.ts: a class per tag, and Nexus with one of each. */
export function resourcesSource(contract: Contract): string {
  const byTag = new Map<string, Method[]>();
  for (const tag of contract.tags ?? []) byTag.set(tag.name, []);
  for (const [path, item] of Object.entries(contract.paths)) {
    for (const httpMethod of METHODS) {
      const op = item[httpMethod] as OperationObject | undefined;
      if (!op) continue;
      if (!op.operationId) throw new Error(`${httpMethod.toUpperCase()} ${path} has no operationId: the client cannot name it`);
      const tag = op.tags?.[0];
      if (!tag) throw new Error(`${op.operationId} has no tag: the client cannot place it in a resource`);
      const name = methodName(op.operationId, tag);
      const methods = byTag.get(tag) ?? [];
      if (methods.some((m) => m.name === name)) throw new Error(`two operations of the tag "${tag}" would be named ${name}`);
      methods.push({ name, source: methodSource(contract, path, httpMethod, op, (item.parameters ?? []) as Parameter[], name) });
      byTag.set(tag, methods);
    }
  }

  const tags = [...byTag.entries()].filter(([, methods]) => methods.length > 0);
  const description = new Map((contract.tags ?? []).map((t) => [t.name, t.description]));
  const classes = tags.map(([tag, methods]) => {
    const property = lowerFirst(words(tag).join(''));
    const className = `${pascal(property)}Resource`;
    const base = RESOURCE_BASES[tag];
    const names = [...(base?.members ?? []), ...methods.map((m) => m.name)];
    const doc = docComment([`${tag}: ${names.join(', ')}.`, description.get(tag)], '');
    return {
      property,
      className,
      tag,
      source: `${doc}export class ${className} extends ${base?.name ?? 'NexusResource'} {\n${methods.map((m) => m.source).join('\n')}}\n`,
    };
  });
  const fields = classes
    .map((c) => `${docComment([c.tag, description.get(c.tag)], '  ')}  readonly ${c.property}: ${c.className} = new ${c.className}(this);`)
    .join('\n');

  return `// Generated from the contract by scripts/client-resources.ts (npm run generate): do not edit.

import * as sdk from './sdk.gen.js';
import type * as types from './types.gen.js';
import { NexusCore, NexusResource, type NexusPromise, type PagePromise, type Params, type RequestOptions } from './runtime.js';
${Object.values(RESOURCE_BASES)
  .map((b) => `import { ${b.name} } from '${b.module}';\n`)
  .join('')}
${classes.map((c) => c.source).join('\n')}
/**
 * The Nexus client, a resource per area of the API:
 *
 *   const nexus = new Nexus({ baseUrl: 'https://nexus.example.com', apiKey: process.env.NEXUS_MANAGEMENT_KEY });
 *   const workspace = await nexus.workspaces.create({ name: 'Acme production' });
 *
 * Every call returns the answer's data (\`.withResponse()\` adds the Response), throws a NexusError, retries
 * what is safe to retry and times out (NexusOptions, RequestOptions).
 */
export class Nexus extends NexusCore {
${fields}
}
`;
}

/** generated/client/codes.gen.ts: the stable error codes the contract lists (`x-error-codes` of the Error body's `code`). */
export function codesSource(contract: Contract): string {
  const error = contract.components.schemas.Error as {
    properties: { error: { properties: { code: { 'x-error-codes'?: string[] } } } };
  };
  const codes = error.properties.error.properties.code['x-error-codes'];
  if (!codes?.length) throw new Error("the Error body's code has no x-error-codes list in the contract");
  return `// Generated from the contract by scripts/client-resources.ts (npm run generate): do not edit.

/** The stable error codes of Nexus, one per cause (the contract's \`x-error-codes\`). */
export const errorCodes = [
${codes.map((c) => `  '${c}',`).join('\n')}
] as const;

/** One of Nexus's stable error codes: what to branch on (\`err.code === 'quota_insufficient'\`). */
export type ErrorCode = (typeof errorCodes)[number];
`;
}

/**
 * generated/client/operations.gen.ts: the operations that take an Idempotency-Key, for the client to make one,
 * and the path parameters whose `/` go as they are (`x-greedy`), for the client not to encode them.
 */
export function operationsSource(contract: Contract): string {
  const idempotent: string[] = [];
  const greedy: string[] = [];
  for (const [path, item] of Object.entries(contract.paths)) {
    for (const httpMethod of METHODS) {
      const op = item[httpMethod] as OperationObject | undefined;
      if (!op) continue;
      const shared = (item.parameters ?? []) as Parameter[];
      const parameters = [...shared, ...(op.parameters ?? [])].map((p) => resolveParameter(contract, p));
      const operation = `${httpMethod.toUpperCase()} ${path}`;
      if (parameters.some((p) => p.in === 'header' && p.name?.toLowerCase() === 'idempotency-key')) idempotent.push(operation);
      for (const p of parameters) if (p.in === 'path' && p['x-greedy']) greedy.push(`  ['${operation}', '${p.name}'],`);
    }
  }
  return `// Generated from the contract by scripts/client-resources.ts (npm run generate): do not edit.

/** The operations that take an Idempotency-Key (\`METHOD /path/{template}\`): a call of one gets a key when it has none. */
export const idempotentOperations: ReadonlySet<string> = new Set([
${idempotent
  .sort()
  .map((o) => `  '${o}',`)
  .join('\n')}
]);

/** The path parameter of an operation whose \`/\` are sent as they are (the contract's \`x-greedy\`), by operation. */
export const greedyPathParameters: ReadonlyMap<string, string> = new Map([
${greedy.sort().join('\n')}
]);
`;
}
