import { text } from 'node:stream/consumers';
import { describe, expect, it } from 'vitest';
import { jsonText, streamedJson, type JsonItems } from '../../src/http/handler.js';

interface Listing {
  name: string;
  items: { n: number; label: string }[];
}

async function* pagesOf(...pages: (Listing['items'] | JsonItems)[]): AsyncGenerator<Listing['items'] | JsonItems> {
  for (const page of pages) yield page;
}

const items = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ n: from + i, label: `item "${from + i}"` }));

describe('a streamed JSON answer', () => {
  const pages = () => pagesOf(items(0, 600), [], items(600, 1), [], items(601, 256));

  it('is the head and every item of every page once, in order, empty pages included, as one JSON document', async () => {
    const answer = streamedJson<Listing, 'items'>({ name: 'a "quoted" name' }, 'items', pages());
    expect(answer.headers['Content-Type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(await text(answer.stream))).toEqual({ name: 'a "quoted" name', items: items(0, 857) });
  });

  it('writes a large page in strings of at most 256 items, never as one', async () => {
    const itemsPerWrite: number[] = [];
    for await (const written of jsonText<Listing, 'items'>({ name: 'n' }, 'items', pages())) {
      itemsPerWrite.push(String(written).match(/"n":/g)?.length ?? 0);
    }
    expect(itemsPerWrite).toEqual([0, 256, 256, 88, 1, 256, 0]);
  });

  it('writes items already made JSON as they are, between and beside pages of items, as one JSON document', async () => {
    const made = (...runs: Listing['items'][]): JsonItems => ({
      jsonItems: runs.map((run) => Buffer.from(JSON.stringify(run).slice(1, -1))),
    });
    const answer = streamedJson<Listing, 'items'>(
      { name: 'made' },
      'items',
      pagesOf(made(items(0, 3), items(3, 1)), items(4, 2), made(items(6, 300)), [], made(items(306, 1))),
    );
    expect(JSON.parse(await text(answer.stream))).toEqual({ name: 'made', items: items(0, 307) });
    const first = streamedJson<Listing, 'items'>({ name: 'first' }, 'items', pagesOf([], made(items(0, 2))));
    expect(JSON.parse(await text(first.stream))).toEqual({ name: 'first', items: items(0, 2) });
  });

  it('is an empty array when no page has items', async () => {
    const answer = streamedJson<Listing, 'items'>({ name: 'none' }, 'items', pagesOf([], []));
    expect(JSON.parse(await text(answer.stream))).toEqual({ name: 'none', items: [] });
  });
});
