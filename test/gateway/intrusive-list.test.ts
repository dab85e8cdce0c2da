import { describe, expect, it } from 'vitest';
import { IntrusiveList, type Linked } from '../../src/gateway/intrusive-list.js';

class Item implements Linked<Item> {
  listPrev: Item | null = null;
  listNext: Item | null = null;
}

/** The list's items, by their index in `all` (identity, not likeness: the items look alike). */
const members = (list: IntrusiveList<Item>, all: Item[]) => {
  const seen: number[] = [];
  list.forEach((r) => seen.push(all.indexOf(r)));
  return seen;
};

describe('IntrusiveList (the calls under way)', () => {
  it("holds what was added until it is deleted, from any place, and clears a deleted item's links", () => {
    const list = new IntrusiveList<Item>();
    const all = [new Item(), new Item(), new Item(), new Item()];
    const [a, b, c, d] = all as [Item, Item, Item, Item];
    expect(list.isEmpty()).toBe(true);
    for (const r of all) list.add(r);
    expect(list.isEmpty()).toBe(false);
    expect(members(list, all)).toEqual([3, 2, 1, 0]);
    list.delete(c); // middle
    list.delete(d); // head
    list.delete(a); // tail
    expect(members(list, all)).toEqual([1]);
    for (const r of [a, c, d]) expect([r.listPrev, r.listNext]).toEqual([null, null]);
    list.delete(c); // twice: nothing happens
    list.delete(b);
    expect(members(list, all)).toEqual([]);
    expect(list.isEmpty()).toBe(true);
    list.add(a);
    expect(members(list, all)).toEqual([0]);
  });

  it('visits each item once while the visit deletes them', () => {
    const list = new IntrusiveList<Item>();
    const all = [new Item(), new Item(), new Item()];
    for (const r of all) list.add(r);
    const visited: number[] = [];
    list.forEach((r) => {
      visited.push(all.indexOf(r));
      list.delete(r);
    });
    expect(visited.sort()).toEqual([0, 1, 2]);
    expect(members(list, all)).toEqual([]);
  });
});
