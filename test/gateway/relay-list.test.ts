import { describe, expect, it } from 'vitest';
import { Relay, RelayList } from '../../src/gateway/relay.js';

const relay = () =>
  new Relay({ on() {}, off() {} } as never, { requestId: 'r', answerHeaders: [], inspector: undefined, prepared: undefined, maskedKey: null });

/** The list's relays, by their index in `all` (identity, not likeness: the relays look alike). */
const members = (list: RelayList, all: Relay[]) => {
  const seen: number[] = [];
  list.forEach((r) => seen.push(all.indexOf(r)));
  return seen;
};

describe('RelayList (the calls under way)', () => {
  it('holds what was added until it is deleted, from any place, and clears a deleted relay\'s links', () => {
    const list = new RelayList();
    const all = [relay(), relay(), relay(), relay()];
    const [a, b, c, d] = all as [Relay, Relay, Relay, Relay];
    for (const r of all) list.add(r);
    expect(members(list, all)).toEqual([3, 2, 1, 0]);
    list.delete(c); // middle
    list.delete(d); // head
    list.delete(a); // tail
    expect(members(list, all)).toEqual([1]);
    for (const r of [a, c, d]) expect([r.listPrev, r.listNext]).toEqual([null, null]);
    list.delete(c); // twice: nothing happens
    list.delete(b);
    expect(members(list, all)).toEqual([]);
    list.add(a);
    expect(members(list, all)).toEqual([0]);
  });

  it('visits each relay once while the visit deletes them', () => {
    const list = new RelayList();
    const all = [relay(), relay(), relay()];
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
