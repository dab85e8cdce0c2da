/**
 * Response validation against the contract, for every response a test receives
 * through the harness: the status must be declared for the operation, the body
 * must match its schema and the declared headers theirs. Each validated response
 * is recorded for the coverage report.
 *
 * The validator reads generated/openapi.json itself (no import of the app) and is built on first
 * use, once per worker: the api project shares modules between its files (vitest.config.ts).
 */
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OpenAPIBackend, type Document, type Operation } from 'openapi-backend';
import addFormatsPkg from 'ajv-formats';
import { Ajv } from 'ajv';
import { projectRoot, runDir } from './paths.js';

const addFormats = addFormatsPkg as unknown as (ajv: unknown) => unknown;

let backend: OpenAPIBackend | undefined;

function contract(): OpenAPIBackend {
  if (!backend) {
    backend = new OpenAPIBackend({
      definition: JSON.parse(readFileSync(join(projectRoot, 'generated', 'openapi.json'), 'utf8')) as Document,
      quick: true,
      validate: true,
      ajvOpts: { strict: false },
      customizeAjv: (ajv) => {
        addFormats(ajv);
        return ajv;
      },
    });
    backend.validateDefinition = () => backend!.document;
    // Quick mode with a document object: init() has run to its end by the time it returns its promise.
    void backend.init();
  }
  return backend;
}

class ContractViolation extends Error {
  constructor(message: string) {
    super(message);
    violations.push(message);
  }
}

/** Violations seen by this worker; test/support/setup-each.ts fails the test that caused one. */
export const violations: string[] = [];

interface DeclaredResponse {
  headers?: Record<string, { required?: boolean; schema?: object }>;
}

const headerAjv = new Ajv({ strict: false, coerceTypes: true });
addFormats(headerAjv);

/** Declared headers: each one present must match its schema; a required one must be present. */
function validateHeaders(id: string, status: number, declared: DeclaredResponse, headers: Record<string, string>): void {
  for (const [name, spec] of Object.entries(declared.headers ?? {})) {
    const value = headers[name.toLowerCase()];
    if (value === undefined) {
      if (spec.required) throw new ContractViolation(`${id} ${status}: required header ${name} is missing`);
      continue;
    }
    if (spec.schema && !headerAjv.validate(spec.schema, value)) {
      throw new ContractViolation(`${id} ${status}: header ${name}='${String(value)}' does not match: ${headerAjv.errorsText()}`);
    }
  }
}

const GATEWAY_OPERATIONS: Record<string, string> = {
  GET: 'proxyProviderGet',
  POST: 'proxyProviderPost',
  PUT: 'proxyProviderPut',
  PATCH: 'proxyProviderPatch',
  DELETE: 'proxyProviderDelete',
};

/** The operation of a request; gateway paths by method, since their providerPath is a greedy suffix. */
function matchOperation(method: string, path: string): Operation | undefined {
  const api = contract();
  if (path.startsWith('/providers/')) {
    const id = GATEWAY_OPERATIONS[method.toUpperCase()];
    return id ? api.getOperation(id) : undefined;
  }
  return api.router.matchOperation({ method, path, headers: {} });
}

/** An answer Nexus wrote itself (not one the gateway passed through from the provider). */
function isNexusError(headers: Record<string, string>, body: unknown): boolean {
  const error = (body as { error?: { code?: unknown; request_id?: unknown } } | undefined)?.error;
  return Boolean(headers['x-nexus-request-id'] && typeof error?.code === 'string' && typeof error?.request_id === 'string');
}

function record(operationId: string, method: string, status: number): void {
  mkdirSync(runDir, { recursive: true });
  appendFileSync(join(runDir, `contract-${process.pid}.jsonl`), JSON.stringify({ operationId, method, status }) + '\n');
}

/** Throws ContractViolation when the response drifts from the contract. */
function validateResponse(method: string, url: string, status: number, headers: Record<string, string>, body: unknown): void {
  const path = new URL(url, 'http://x').pathname;
  const operation = matchOperation(method, path);
  if (!operation) throw new ContractViolation(`${method} ${path}: no operation in the contract`);
  validateOperationResponse(operation, method, status, headers, body);
}

/** For raw gateway requests whose path is not a URL fetch would keep as written. */
export function validateGatewayResponse(method: string, status: number, headers: Record<string, string>, body: unknown): void {
  const operation = matchOperation(method, '/providers/');
  if (!operation) throw new ContractViolation(`${method}: not a gateway method`);
  validateOperationResponse(operation, method, status, headers, body);
}

function validateOperationResponse(
  operation: Operation,
  method: string,
  status: number,
  headers: Record<string, string>,
  body: unknown,
): void {
  const api = contract();
  const id = operation.operationId!;
  const gateway = id.startsWith('proxyProvider');
  // The gateway passes any provider status through as it is (documented under 200); only its own
  // errors must be declared and match the Error body.
  const nexusError = gateway && isNexusError(headers, body);
  const declared =
    operation.responses?.[String(status)] ??
    operation.responses?.default ??
    (gateway && !nexusError ? operation.responses?.['200'] : undefined);
  if (!declared) {
    throw new ContractViolation(`${id}: status ${status} is not declared (body: ${JSON.stringify(body)?.slice(0, 300)})`);
  }
  const contentType = headers['content-type'] ?? '';
  const isJson = contentType.includes('application/json');
  const declaresJson = Boolean((declared as { content?: Record<string, unknown> }).content?.['application/json']);
  if (gateway ? nexusError : declaresJson && isJson) {
    const result = api.validateResponse(body, operation, status);
    if (result.errors?.length) {
      throw new ContractViolation(
        `${id} ${status}: body does not match the contract: ${JSON.stringify(result.errors).slice(0, 800)}\nbody: ${JSON.stringify(body)?.slice(0, 500)}`,
      );
    }
  } else if (declaresJson && status !== 204 && !gateway) {
    throw new ContractViolation(`${id} ${status}: expected application/json, got '${contentType}'`);
  }
  validateHeaders(id, status, declared as DeclaredResponse, headers);
  record(id, method, status);
}

/**
 * A fetch that validates every response against the contract before the caller
 * sees it. Give it to the generated client, the openai/anthropic SDKs or use it raw.
 */
export function contractFetch(inner: typeof fetch = fetch): typeof fetch {
  return async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    // The openai SDK fetches `data:,` once before its first upload, to see whether this fetch takes FormData.
    if (request.url.startsWith('data:')) return inner(request);
    const response = await inner(request);
    const contentType = response.headers.get('content-type') ?? '';
    const headers: Record<string, string> = {};
    response.headers.forEach((v, k) => (headers[k] = v));
    // Streams are validated on status and headers only: reading them here would buffer them.
    let body: unknown;
    if (contentType.includes('application/json')) {
      const text = await response.clone().text();
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
    }
    recordResponseText(contentType.includes('text/event-stream') ? '' : JSON.stringify(body ?? ''));
    validateResponse(request.method, request.url, response.status, headers, body);
    return response;
  };
}

/** Everything a test received, for the scan that proves no secret ever left the service. */
function recordResponseText(text: string): void {
  if (!text) return;
  mkdirSync(runDir, { recursive: true });
  appendFileSync(join(runDir, `responses-${process.pid}.log`), text + '\n');
}
