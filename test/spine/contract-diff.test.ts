/**
 * The contract-diff check of `npm run lint` (scripts/lib/contract-diff.ts): what breaks a caller is found,
 * what does not passes, and a breaking change passes only under a new major version; inside oneOf, anyOf and
 * allOf too, in the operations' security, and in the values an answer may carry. Last, the committed
 * baseline (openapi/released.json) against the bundled contract: what `npm run lint` runs.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { breakingChanges, verdict, type Json } from '../../scripts/lib/contract-diff.js';
import { projectRoot } from '../support/paths.js';

function contract(version = '1.2.0'): Json {
  return {
    openapi: '3.1.0',
    info: { title: 't', version },
    paths: {
      '/things': {
        get: {
          parameters: [
            { $ref: '#/components/parameters/Limit' },
            { name: 'status', in: 'query', schema: { type: 'string', enum: ['A', 'B'] } },
          ],
          responses: {
            '200': { content: { 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/Thing' } } } } },
          },
        },
        put: {
          security: [{ key: [] }],
          requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Choice' } } } },
          responses: { '200': { content: { 'application/json': { schema: { $ref: '#/components/schemas/Answer' } } } } },
        },
        post: {
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewThing' } } } },
          responses: { '201': { content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } } },
        },
      },
      '/things/{id}': {
        delete: { parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }], responses: { '204': {} } },
      },
    },
    components: {
      parameters: { Limit: { name: 'limit', in: 'query', schema: { type: 'integer' } } },
      securitySchemes: {
        key: { type: 'http', scheme: 'bearer' },
        header: { type: 'apiKey', in: 'header', name: 'x-key' },
      },
      schemas: {
        Choice: {
          oneOf: [{ $ref: '#/components/schemas/ByName' }, { $ref: '#/components/schemas/ById' }],
          description: 'one way or the other',
        },
        ByName: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
        ById: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } },
        Answer: {
          allOf: [
            { $ref: '#/components/schemas/Base' },
            {
              type: 'object',
              required: ['state'],
              properties: {
                state: { type: 'string', enum: ['on', 'off'] },
                kind: { const: 'answer' },
                profile: { type: 'string', enum: ['a', 'b'], 'x-open-enum': true },
                detail: { anyOf: [{ type: 'string' }, { $ref: '#/components/schemas/Thing' }] },
              },
            },
          ],
        },
        Base: { type: 'object', required: ['id'], properties: { id: { type: 'string' }, label: { type: 'string' } } },
        Thing: {
          type: 'object',
          required: ['id', 'name'],
          properties: { id: { type: 'string' }, name: { type: 'string' }, note: { type: 'string' } },
        },
        NewThing: {
          type: 'object',
          required: ['name'],
          additionalProperties: false,
          properties: { name: { type: 'string' }, kind: { type: 'string', enum: ['x', 'y'] } },
        },
      },
    },
  };
}

function changed(edit: (c: any) => void, version?: string): Json {
  const c = contract(version);
  edit(c);
  return c;
}

describe('breaking changes', () => {
  it('finds none between a contract and itself, nor in additions a caller does not see', () => {
    expect(breakingChanges(contract(), contract())).toEqual([]);
    const additive = changed((c) => {
      c.paths['/other'] = { get: { responses: { '200': {} } } };
      c.paths['/things'].get.parameters.push({ name: 'q', in: 'query', schema: { type: 'string' } });
      c.components.schemas.Thing.properties.extra = { type: 'string' };
      c.components.schemas.NewThing.properties.extra = { type: 'string' };
      c.components.schemas.NewThing.properties.kind.enum.push('z');
      c.paths['/things'].get.parameters[1].schema.enum.push('C');
    });
    expect(breakingChanges(contract(), additive)).toEqual([]);
  });

  it('finds each kind of break, naming the operation and the place', () => {
    const cases: [string, (c: any) => void, string][] = [
      ['an operation removed', (c) => delete c.paths['/things/{id}'].delete, 'DELETE /things/{id}: removed'],
      [
        'a 2xx answer removed',
        (c) => (c.paths['/things'].post.responses = { '200': c.paths['/things'].post.responses['201'] }),
        'POST /things: the 201 answer removed',
      ],
      ['a parameter removed', (c) => c.paths['/things'].get.parameters.pop(), 'GET /things: the query status parameter removed'],
      [
        'a required parameter added',
        (c) => c.paths['/things'].get.parameters.push({ name: 'q', in: 'query', required: true }),
        'GET /things: a required query q parameter added',
      ],
      [
        'a parameter made required',
        (c) => (c.components.parameters.Limit.required = true),
        'GET /things: the query limit parameter is now required',
      ],
      [
        'an enum value of a parameter removed',
        (c) => (c.paths['/things'].get.parameters[1].schema.enum = ['A']),
        'GET /things query status: no longer accepts "B"',
      ],
      ['a body property required', (c) => c.components.schemas.NewThing.required.push('kind'), 'POST /things body.kind: is now required'],
      [
        'a body property removed, none other accepted',
        (c) => delete c.components.schemas.NewThing.properties.kind,
        'POST /things body.kind: removed (and no other property is accepted)',
      ],
      [
        'a body type narrowed',
        (c) => (c.components.schemas.NewThing.properties.name.type = 'integer'),
        'POST /things body.name: no longer accepts the type string',
      ],
      [
        'an answer property removed',
        (c) => delete c.components.schemas.Thing.properties.note,
        'POST /things 201.note: removed from the answer',
      ],
      [
        'an answer property no longer required',
        (c) => (c.components.schemas.Thing.required = ['id']),
        'POST /things 201.name: no longer always in the answer',
      ],
      [
        'an answer type widened',
        (c) => (c.components.schemas.Thing.properties.name.type = ['string', 'null']),
        'POST /things 201.name: may now be of the type null',
      ],
      [
        'an item of a list answer changed',
        (c) => delete c.components.schemas.Thing.properties.id,
        'GET /things 200[].id: removed from the answer',
      ],
    ];
    for (const [what, edit, line] of cases) expect(breakingChanges(contract(), changed(edit)), what).toContain(line);
  });

  it('lets a breaking change through only under a new major version', () => {
    const removed = (c: any) => delete c.paths['/things/{id}'].delete;
    expect(verdict(contract('1.2.0'), changed(removed, '1.3.0'))).toMatchObject({ ok: false, changes: ['DELETE /things/{id}: removed'] });
    expect(verdict(contract('1.2.0'), changed(removed, '1.3.0')).message).toContain('without a new major version');
    expect(verdict(contract('1.2.0'), changed(removed, '2.0.0')).ok).toBe(true);
    expect(verdict(contract('1.0.0-beta.1'), changed(removed, '1.0.0-beta.2')).ok).toBe(false);
    expect(verdict(contract('0.3.0'), changed(removed, '0.4.0')).ok).toBe(true);
    expect(verdict(contract('1.2.0'), contract('1.2.1'))).toMatchObject({ ok: true, changes: [] });
  });
});

describe('oneOf, anyOf and allOf', () => {
  it('finds none in what a caller does not see: an alternative accepted more, an answer that gives fewer', () => {
    const additive = changed((c) => {
      c.components.schemas.Choice.oneOf.push({ type: 'string' });
      c.components.schemas.Answer.allOf[1].properties.detail.anyOf.shift();
      c.components.schemas.Base.properties.extra = { type: 'integer' };
    });
    expect(breakingChanges(contract(), additive)).toEqual([]);
    // The same schema moved into an allOf, or an alternative of its own, changes nothing.
    const moved = changed((c) => {
      c.components.schemas.Thing = { allOf: [c.components.schemas.Thing] };
      c.components.schemas.NewThing = { oneOf: [c.components.schemas.NewThing] };
    });
    expect(breakingChanges(contract(), moved)).toEqual([]);
  });

  it('finds each break inside them, naming the place', () => {
    const cases: [string, (c: any) => void, string][] = [
      [
        'an alternative a request no longer accepts',
        (c) => c.components.schemas.Choice.oneOf.pop(),
        'PUT /things body: no longer accepts ById',
      ],
      [
        'an alternative of a request narrowed',
        (c) => c.components.schemas.ById.required.push('version'),
        'PUT /things body.version: is now required',
      ],
      [
        'a request that was one schema, now alternatives without it',
        (c) => (c.components.schemas.NewThing = { oneOf: [{ type: 'string' }, { type: 'integer' }] }),
        'POST /things body: no longer accepts NewThing',
      ],
      [
        'an alternative an answer may now be',
        (c) => c.components.schemas.Answer.allOf[1].properties.detail.anyOf.push({ type: 'integer' }),
        'PUT /things 200.detail: may now be the integer alternative',
      ],
      [
        'an answer that was one schema, now one or null',
        (c) =>
          (c.paths['/things'].post.responses['201'].content['application/json'].schema = {
            oneOf: [{ $ref: '#/components/schemas/Thing' }, { type: 'null' }],
          }),
        'POST /things 201: may now be the null alternative',
      ],
      [
        'a property removed from an alternative of an answer',
        (c) => delete c.components.schemas.Thing.properties.note,
        'PUT /things 200.detail.note: removed from the answer',
      ],
      [
        'a property removed from a part of an allOf answer',
        (c) => delete c.components.schemas.Base.properties.label,
        'PUT /things 200.label: removed from the answer',
      ],
      [
        'a property no longer required by a part of an allOf answer',
        (c) => (c.components.schemas.Answer.allOf[1].required = []),
        'PUT /things 200.state: no longer always in the answer',
      ],
      [
        'a request body required through an allOf',
        (c) => (c.components.schemas.NewThing = { allOf: [c.components.schemas.NewThing, { type: 'object', required: ['kind'] }] }),
        'POST /things body.kind: is now required',
      ],
    ];
    for (const [what, edit, line] of cases) expect(breakingChanges(contract(), changed(edit)), what).toContain(line);
  });
});

describe('security', () => {
  it('finds none when another way of calling is added', () => {
    const added = changed((c) => c.paths['/things'].put.security.push({ header: [] }));
    expect(breakingChanges(contract(), added)).toEqual([]);
  });

  it('finds a credential asked where none was, one replaced, a scope more, a scheme that changed', () => {
    const cases: [string, (c: any) => void, string][] = [
      ['security on the whole contract', (c) => (c.security = [{ key: [] }]), 'GET /things: no longer accepts a call without credentials'],
      [
        'security on one operation',
        (c) => (c.paths['/things/{id}'].delete.security = [{ header: [] }]),
        'DELETE /things/{id}: no longer accepts a call without credentials',
      ],
      ['another scheme', (c) => (c.paths['/things'].put.security = [{ header: [] }]), 'PUT /things: no longer accepts key'],
      ['two schemes at once', (c) => (c.paths['/things'].put.security = [{ key: [], header: [] }]), 'PUT /things: no longer accepts key'],
      ['a scope more', (c) => (c.paths['/things'].put.security = [{ key: ['things:write'] }]), 'PUT /things: no longer accepts key'],
      [
        'a scheme sent otherwise',
        (c) => (c.components.securitySchemes.key = { type: 'apiKey', in: 'header', name: 'x-key' }),
        'PUT /things: the key credential now goes otherwise (type, scheme, in, name)',
      ],
    ];
    for (const [what, edit, line] of cases) expect(breakingChanges(contract(), changed(edit)), what).toContain(line);
  });
});

describe('the values of an answer', () => {
  it('finds a value added to an answer, a list of values dropped, a const changed', () => {
    const cases: [string, (c: any) => void, string][] = [
      [
        'a value added',
        (c) => c.components.schemas.Answer.allOf[1].properties.state.enum.push('broken'),
        'PUT /things 200.state: may now be "broken"',
      ],
      [
        'no list any more',
        (c) => delete c.components.schemas.Answer.allOf[1].properties.state.enum,
        'PUT /things 200.state: no longer limited to "on", "off"',
      ],
      [
        'a const changed',
        (c) => (c.components.schemas.Answer.allOf[1].properties.kind.const = 'reply'),
        'PUT /things 200.kind: may now be "reply"',
      ],
    ];
    for (const [what, edit, line] of cases) expect(breakingChanges(contract(), changed(edit)), what).toContain(line);
  });

  it('lets an enum marked x-open-enum gain values, and a request take more', () => {
    const grown = changed((c) => {
      c.components.schemas.Answer.allOf[1].properties.profile.enum.push('c');
      c.components.schemas.NewThing.properties.kind.enum.push('z');
    });
    expect(breakingChanges(contract(), grown)).toEqual([]);
  });

  it('finds a value a request no longer accepts, and a list put on a request field that had none', () => {
    expect(
      breakingChanges(
        contract(),
        changed((c) => (c.components.schemas.NewThing.properties.kind.enum = ['x'])),
      ),
    ).toContain('POST /things body.kind: no longer accepts "y"');
    expect(
      breakingChanges(
        contract(),
        changed((c) => (c.components.schemas.NewThing.properties.name = { type: 'string', enum: ['a', 'b'] })),
      ),
    ).toContain('POST /things body.name: now accepts only "a", "b"');
  });
});

it('the bundled contract breaks nothing of the released one (openapi/released.json), or has a new major version', () => {
  const read = (file: string) => JSON.parse(readFileSync(join(projectRoot, file), 'utf8')) as Json;
  const result = verdict(read('openapi/released.json'), read('generated/openapi.json'));
  expect(result.ok, result.changes.join('\n')).toBe(true);
});
