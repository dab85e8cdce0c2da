/**
 * What scripts/contract-diff.ts checks: the changes of a contract that break its callers. See that script.
 */
export type Json = Record<string, unknown>;

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: Json;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function resolve(contract: Json, node: unknown): Json {
  let value = node as Json | undefined;
  for (let hops = 0; value && typeof value.$ref === 'string' && hops < 20; hops++) {
    const ref: string = value.$ref;
    value = ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((at, key) => (at as Json | undefined)?.[key.replaceAll('~1', '/').replaceAll('~0', '~')], contract) as
      Json | undefined;
  }
  return value ?? {};
}

function typesOf(schema: Json): string[] | undefined {
  if (schema.type === undefined) return undefined;
  return Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
}

/** Compares two schemas in the direction the data goes: a request's (the new must accept what the old accepted) or an answer's (the new must give what the old gave). */
function compareSchemas(
  before: Json,
  after: Json,
  old: unknown,
  current: unknown,
  direction: 'request' | 'response',
  where: string,
  found: string[],
  seen: Set<string>,
): void {
  const a = resolve(before, old);
  const b = resolve(after, current);
  const key = `${direction}|${JSON.stringify((old as Json | undefined)?.$ref)}|${JSON.stringify((current as Json | undefined)?.$ref)}|${where}`;
  if (seen.has(key) || where.split('.').length > 40) return;
  seen.add(key);

  const ta = typesOf(a);
  const tb = typesOf(b);
  if (ta && tb) {
    const lost = direction === 'request' ? ta.filter((t) => !tb.includes(t) && !(t === 'integer' && tb.includes('number'))) : [];
    const gained = direction === 'response' ? tb.filter((t) => !ta.includes(t) && !(t === 'integer' && ta.includes('number'))) : [];
    if (lost.length) found.push(`${where}: no longer accepts the type ${lost.join(', ')}`);
    if (gained.length) found.push(`${where}: may now be of the type ${gained.join(', ')}`);
  } else if (ta && !tb && direction === 'response') {
    // No type any more: it may be anything.
    found.push(`${where}: its type (${ta.join(', ')}) is no longer given`);
  }

  if (direction === 'request' && Array.isArray(a.enum)) {
    const removed = Array.isArray(b.enum) ? (a.enum as unknown[]).filter((v) => !(b.enum as unknown[]).includes(v)) : [];
    if (removed.length) found.push(`${where}: no longer accepts ${removed.map((v) => JSON.stringify(v)).join(', ')}`);
  }
  if (direction === 'request' && !Array.isArray(a.enum) && Array.isArray(b.enum) && !(ta ?? []).includes('boolean')) {
    found.push(`${where}: now accepts only ${(b.enum as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`);
  }

  const requiredA = new Set((a.required as string[] | undefined) ?? []);
  const requiredB = new Set((b.required as string[] | undefined) ?? []);
  const propsA = (a.properties as Record<string, unknown> | undefined) ?? {};
  const propsB = (b.properties as Record<string, unknown> | undefined) ?? {};
  if (direction === 'request') {
    for (const name of requiredB) if (!requiredA.has(name)) found.push(`${where}.${name}: is now required`);
    for (const name of Object.keys(propsA)) {
      if (!(name in propsB) && b.additionalProperties === false)
        found.push(`${where}.${name}: removed (and no other property is accepted)`);
    }
  } else {
    for (const name of Object.keys(propsA)) {
      if (!(name in propsB) && b.additionalProperties !== true) found.push(`${where}.${name}: removed from the answer`);
    }
    for (const name of requiredA)
      if (!requiredB.has(name) && name in propsB) found.push(`${where}.${name}: no longer always in the answer`);
  }
  for (const [name, schema] of Object.entries(propsA)) {
    if (name in propsB) {
      compareSchemas(before, after, schema, propsB[name], direction, `${where}.${name}`, found, seen);
    }
  }
  if (a.items && b.items) {
    compareSchemas(before, after, a.items, b.items, direction, `${where}[]`, found, seen);
  }
}

function jsonSchemaOf(contract: Json, holder: unknown): unknown {
  const content = resolve(contract, holder).content as Record<string, { schema?: unknown }> | undefined;
  return content?.['application/json']?.schema;
}

/** What in `after` breaks a caller of `before`: one line each. */
export function breakingChanges(before: Json, after: Json): string[] {
  const found: string[] = [];
  const seen = new Set<string>();
  const pathsA = (before.paths ?? {}) as Record<string, Json>;
  const pathsB = (after.paths ?? {}) as Record<string, Json>;
  for (const [path, itemA] of Object.entries(pathsA)) {
    for (const method of METHODS) {
      const opA = itemA[method] as Json | undefined;
      if (!opA) continue;
      const name = `${method.toUpperCase()} ${path}`;
      const opB = pathsB[path]?.[method] as Json | undefined;
      if (!opB) {
        found.push(`${name}: removed`);
        continue;
      }
      const params = (contract: Json, item: Json, op: Json) =>
        new Map(
          [...((item.parameters as unknown[]) ?? []), ...((op.parameters as unknown[]) ?? [])]
            .map((p) => resolve(contract, p) as unknown as Parameter)
            .map((p) => [`${p.in} ${p.name}`, p]),
        );
      const paramsA = params(before, itemA, opA);
      const paramsB = params(after, pathsB[path]!, opB);
      for (const [id, p] of paramsA) {
        const q = paramsB.get(id);
        if (!q) found.push(`${name}: the ${id} parameter removed`);
        else {
          if (q.required && !p.required) found.push(`${name}: the ${id} parameter is now required`);
          compareSchemas(before, after, p.schema, q.schema, 'request', `${name} ${id}`, found, seen);
        }
      }
      for (const [id, q] of paramsB) if (!paramsA.has(id) && q.required) found.push(`${name}: a required ${id} parameter added`);

      const bodyA = opA.requestBody ? resolve(before, opA.requestBody) : undefined;
      const bodyB = opB.requestBody ? resolve(after, opB.requestBody) : undefined;
      if (bodyB?.required && !bodyA?.required) found.push(`${name}: the request body is now required`);
      if (bodyA && bodyB) {
        const schemaA = jsonSchemaOf(before, bodyA);
        const schemaB = jsonSchemaOf(after, bodyB);
        if (schemaA && schemaB) {
          compareSchemas(before, after, schemaA, schemaB, 'request', `${name} body`, found, seen);
        }
      }

      const responsesA = (opA.responses ?? {}) as Record<string, unknown>;
      const responsesB = (opB.responses ?? {}) as Record<string, unknown>;
      for (const [status, answerA] of Object.entries(responsesA)) {
        if (!status.startsWith('2')) continue;
        if (!(status in responsesB)) {
          found.push(`${name}: the ${status} answer removed`);
          continue;
        }
        const schemaA = jsonSchemaOf(before, answerA);
        const schemaB = jsonSchemaOf(after, responsesB[status]);
        if (schemaA && !schemaB) found.push(`${name}: the ${status} answer's JSON body removed`);
        if (schemaA && schemaB) {
          compareSchemas(before, after, schemaA, schemaB, 'response', `${name} ${status}`, found, seen);
        }
      }
    }
  }
  return found;
}

function major(version: string): number {
  return Number(/^(\d+)\./.exec(version)?.[1] ?? NaN);
}

/** The verdict: breaking changes pass only under a new major version (or before 1.0.0). */
export function verdict(before: Json, after: Json): { ok: boolean; changes: string[]; message: string } {
  const changes = breakingChanges(before, after);
  const from = String((before.info as Json | undefined)?.version);
  const to = String((after.info as Json | undefined)?.version);
  if (!changes.length) return { ok: true, changes, message: `contract ${to}: no breaking change since ${from}` };
  if (major(to) > major(from) || major(to) === 0) {
    return { ok: true, changes, message: `contract ${to}: ${changes.length} breaking change(s) since ${from}, under a new major version` };
  }
  return {
    ok: false,
    changes,
    message: `contract ${to}: ${changes.length} breaking change(s) since ${from} without a new major version (change info.version's major, or undo them)`,
  };
}
