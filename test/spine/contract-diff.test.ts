/**
 * The contract-diff check of `npm run lint` (scripts/lib/contract-diff.ts): what breaks a caller is found,
 * what does not passes, and a breaking change passes only under a new major version. Last, the committed
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
      schemas: {
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

it('the bundled contract breaks nothing of the released one (openapi/released.json), or has a new major version', () => {
  const read = (file: string) => JSON.parse(readFileSync(join(projectRoot, file), 'utf8')) as Json;
  const result = verdict(read('openapi/released.json'), read('generated/openapi.json'));
  expect(result.ok, result.changes.join('\n')).toBe(true);
});
