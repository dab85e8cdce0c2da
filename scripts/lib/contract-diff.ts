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

/** Keywords that say nothing of what a value may be: a schema of these alone (beside oneOf) adds no condition. */
const ANNOTATIONS = new Set(['description', 'title', 'example', 'examples', 'default', 'deprecated', 'readOnly', 'writeOnly', '$comment']);

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

/** The schema with its allOf merged in: the properties of every part, every part's required, the types and values all parts allow. */
function flatten(contract: Json, node: unknown, depth = 0): Json {
  const schema = resolve(contract, node);
  if (!Array.isArray(schema.allOf) || depth > 20) return schema;
  const { allOf, ...own } = schema;
  let merged: Json = own;
  for (const part of allOf as unknown[]) merged = mergeSchemas(merged, flatten(contract, part, depth + 1));
  return merged;
}

function mergeSchemas(a: Json, b: Json): Json {
  const merged: Json = { ...a, ...b };
  const propsA = (a.properties as Record<string, unknown> | undefined) ?? {};
  const propsB = (b.properties as Record<string, unknown> | undefined) ?? {};
  const properties: Record<string, unknown> = { ...propsA };
  // A property both parts describe must satisfy both.
  for (const [name, schema] of Object.entries(propsB)) properties[name] = name in propsA ? { allOf: [propsA[name], schema] } : schema;
  if (a.properties || b.properties) merged.properties = properties;
  if (a.required || b.required) merged.required = [...new Set([...((a.required as string[]) ?? []), ...((b.required as string[]) ?? [])])];
  const ta = typesOf(a);
  const tb = typesOf(b);
  if (ta && tb) merged.type = ta.filter((t) => tb.includes(t) || (t === 'integer' && tb.includes('number')));
  const ea = valuesOf(a);
  const eb = valuesOf(b);
  if (ea && eb) merged.enum = ea.filter((v) => eb.some((w) => same(v, w)));
  delete merged.const;
  if (!merged.enum && (ea ?? eb)) merged.enum = ea ?? eb;
  if (a.additionalProperties === false || b.additionalProperties === false) merged.additionalProperties = false;
  return merged;
}

function typesOf(schema: Json): string[] | undefined {
  if (schema.type === undefined) return undefined;
  return Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
}

/** The values a schema allows, when it lists them (`enum`, or `const` as a list of one). */
function valuesOf(schema: Json): unknown[] | undefined {
  if (Array.isArray(schema.enum)) return schema.enum as unknown[];
  if ('const' in schema) return [schema.const];
  return undefined;
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function listed(values: unknown[]): string {
  return values.map((v) => JSON.stringify(v)).join(', ');
}

/** The alternatives of a schema (its oneOf or anyOf, each with the schema's other conditions); undefined when it has none. */
function alternativesOf(schema: Json): unknown[] | undefined {
  const branches = (schema.oneOf ?? schema.anyOf) as unknown[] | undefined;
  if (!Array.isArray(branches)) return undefined;
  const { oneOf: _oneOf, anyOf: _anyOf, ...rest } = schema;
  const conditions = Object.keys(rest).some((k) => !ANNOTATIONS.has(k) && !k.startsWith('x-'));
  return conditions ? branches.map((branch) => ({ allOf: [rest, branch] })) : branches;
}

/** How an alternative is named in a finding: its schema's name, else its types, else its place. */
function alternativeName(contract: Json, node: unknown, index: number): string {
  const ref = (node as Json | undefined)?.$ref;
  if (typeof ref === 'string') return ref.split('/').pop()!;
  const types = typesOf(flatten(contract, node));
  return types ? `the ${types.join(' or ')} alternative` : `alternative ${index + 1}`;
}

interface Sides {
  before: Json;
  after: Json;
  direction: 'request' | 'response';
}

/**
 * Compares alternatives in the direction the data goes. A request: each alternative the old schema accepted is still
 * accepted by one of the new. An answer: each alternative the new schema may give is one the old could give.
 */
function compareAlternatives(
  sides: Sides,
  altsA: unknown[],
  altsB: unknown[],
  where: string,
  found: string[],
  seen: Set<string>,
  via: string,
): void {
  const { before, after, direction } = sides;
  // What must still be covered, and what may cover it.
  const [must, may, mustContract, mayContract] = direction === 'request' ? [altsA, altsB, before, after] : [altsB, altsA, after, before];
  if (must.length === 1 && may.length === 1) {
    const [a, b] = direction === 'request' ? [must[0], may[0]] : [may[0], must[0]];
    compareSchemas(sides, a, b, where, found, seen, `${via}|0`);
    return;
  }
  must.forEach((alternative, index) => {
    const name = alternativeName(mustContract, alternative, index);
    const findingsOf = (candidate: unknown) => {
      const scratch: string[] = [];
      const [a, b] = direction === 'request' ? [alternative, candidate] : [candidate, alternative];
      compareSchemas(sides, a, b, where, scratch, new Set(seen), `${via}|${index}>${may.indexOf(candidate)}`);
      return scratch;
    };
    // The alternative of the same name first: its findings are the precise ones.
    const namesake = may.find((candidate, i) => alternativeName(mayContract, candidate, i) === name);
    if (namesake !== undefined) {
      const findings = findingsOf(namesake);
      if (!findings.length) return;
      if (!may.some((candidate) => candidate !== namesake && !findingsOf(candidate).length)) found.push(...findings);
      return;
    }
    if (may.some((candidate) => !findingsOf(candidate).length)) return;
    found.push(direction === 'request' ? `${where}: no longer accepts ${name}` : `${where}: may now be ${name}`);
  });
}

/** Compares two schemas in the direction the data goes: a request's (the new must accept what the old accepted) or an answer's (the new must give what the old gave). */
function compareSchemas(sides: Sides, old: unknown, current: unknown, where: string, found: string[], seen: Set<string>, via = ''): void {
  const { before, after, direction } = sides;
  // `via` tells apart the comparisons of alternatives at one place.
  const key = `${direction}|${JSON.stringify((old as Json | undefined)?.$ref)}|${JSON.stringify((current as Json | undefined)?.$ref)}|${where}|${via}`;
  if (seen.has(key) || where.split('.').length > 40) return;
  seen.add(key);
  const a = flatten(before, old);
  const b = flatten(after, current);

  const altsA = alternativesOf(a);
  const altsB = alternativesOf(b);
  if (altsA || altsB) {
    compareAlternatives(sides, altsA ?? [old], altsB ?? [current], where, found, seen, via);
    return;
  }

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

  const valuesA = valuesOf(a);
  const valuesB = valuesOf(b);
  if (direction === 'request') {
    if (valuesA && valuesB) {
      const removed = valuesA.filter((v) => !valuesB.some((w) => same(v, w)));
      if (removed.length) found.push(`${where}: no longer accepts ${listed(removed)}`);
    }
    if (!valuesA && valuesB && !(ta ?? []).includes('boolean')) found.push(`${where}: now accepts only ${listed(valuesB)}`);
  } else {
    // A caller that handles each value the answer may carry (a switch over a closed union) meets one it does not know,
    // unless the contract says the list grows (`x-open-enum`: callers handle a value they do not know).
    if (valuesA && valuesB && b['x-open-enum'] !== true) {
      const added = valuesB.filter((v) => !valuesA.some((w) => same(v, w)));
      if (added.length) found.push(`${where}: may now be ${listed(added)}`);
    }
    if (valuesA && !valuesB) found.push(`${where}: no longer limited to ${listed(valuesA)}`);
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
    if (name in propsB) compareSchemas(sides, schema, propsB[name], `${where}.${name}`, found, seen);
  }
  if (a.items && b.items) compareSchemas(sides, a.items, b.items, `${where}[]`, found, seen);
}

function jsonSchemaOf(contract: Json, holder: unknown): unknown {
  const content = resolve(contract, holder).content as Record<string, { schema?: unknown }> | undefined;
  return content?.['application/json']?.schema;
}

type Requirement = Record<string, string[]>;

/** An operation's security: its own, else the contract's; each requirement one way to call it ({} none at all). */
function securityOf(contract: Json, op: Json): Requirement[] {
  const requirements = (op.security ?? contract.security ?? []) as Requirement[];
  return requirements.length ? requirements : [{}];
}

function requirementName(requirement: Requirement): string {
  const schemes = Object.entries(requirement).map(([scheme, scopes]) => (scopes.length ? `${scheme} (${scopes.join(', ')})` : scheme));
  return schemes.length ? schemes.join(' with ') : 'a call without credentials';
}

/** What in the security of an operation breaks a caller: a way of calling it that no longer works, a scheme that changed. */
function securityChanges(before: Json, after: Json, opA: Json, opB: Json, name: string): string[] {
  const found: string[] = [];
  const oldWays = securityOf(before, opA);
  const newWays = securityOf(after, opB);
  // A caller's credentials meet an old requirement; a new one accepts them if it asks for no scheme or scope more.
  for (const way of oldWays) {
    const accepted = newWays.some((n) =>
      Object.entries(n).every(([scheme, scopes]) => scheme in way && scopes.every((s) => way[scheme]!.includes(s))),
    );
    if (!accepted) found.push(`${name}: no longer accepts ${requirementName(way)}`);
  }
  const schemesA = ((before.components as Json | undefined)?.securitySchemes ?? {}) as Record<string, Json>;
  const schemesB = ((after.components as Json | undefined)?.securitySchemes ?? {}) as Record<string, Json>;
  const used = new Set(oldWays.flatMap((w) => Object.keys(w)).filter((s) => newWays.some((n) => s in n)));
  for (const scheme of used) {
    const a = resolve(before, schemesA[scheme]);
    const b = resolve(after, schemesB[scheme]);
    // HTTP auth schemes and header names are case-insensitive.
    const text = (value: unknown) => (typeof value === 'string' ? value.toLowerCase() : JSON.stringify(value));
    const changed = ['type', 'scheme', 'in', 'name'].filter((field) => text(a[field]) !== text(b[field]));
    if (changed.length) found.push(`${name}: the ${scheme} credential now goes otherwise (${changed.join(', ')})`);
  }
  return found;
}

/** What in `after` breaks a caller of `before`: one line each. */
export function breakingChanges(before: Json, after: Json): string[] {
  const found: string[] = [];
  const seen = new Set<string>();
  const requests: Sides = { before, after, direction: 'request' };
  const answers: Sides = { before, after, direction: 'response' };
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
      found.push(...securityChanges(before, after, opA, opB, name));
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
          compareSchemas(requests, p.schema, q.schema, `${name} ${id}`, found, seen);
        }
      }
      for (const [id, q] of paramsB) if (!paramsA.has(id) && q.required) found.push(`${name}: a required ${id} parameter added`);

      const bodyA = opA.requestBody ? resolve(before, opA.requestBody) : undefined;
      const bodyB = opB.requestBody ? resolve(after, opB.requestBody) : undefined;
      if (bodyB?.required && !bodyA?.required) found.push(`${name}: the request body is now required`);
      if (bodyA && bodyB) {
        const schemaA = jsonSchemaOf(before, bodyA);
        const schemaB = jsonSchemaOf(after, bodyB);
        if (schemaA && schemaB) compareSchemas(requests, schemaA, schemaB, `${name} body`, found, seen);
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
        if (schemaA && schemaB) compareSchemas(answers, schemaA, schemaB, `${name} ${status}`, found, seen);
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
