import { describe, expect, it } from 'vitest';
import { Relay, RelayList } from '../../src/gateway/relay.js';

const relay = () =>
  new Relay({ on() {}, off() {} } as never, { requestId: 'r', answerHeaders: [], inspector: undefined, prepared: undefined, maskedKey: null });

const members = (list: RelayList) => {
  const seen: Relay[] = [];
  list.forEach((r) => seen.push(r));
  return seen;
};

describe('RelayList (the calls under way)', () => {
  it('holds what was added until it is deleted, from any place, and clears a deleted relay\'s links', () => {
    const list = new RelayList();
    const [a, b, c, d] = [relay(), relay(), relay(), relay()];
    for (const r of [a, b, c, d]) list.add(r);
    expect(members(list)).toEqual([d, c, b, a]);
    list.delete(c); // middle
    list.delete(d); // head
    list.delete(a); // tail
    expect(members(list)).toEqual([b]);
    for (const r of [a, c, d]) expect([r.listPrev, r.listNext]).toEqual([null, null]);
    list.delete(c); // twice: nothing happens
    list.delete(b);
    expect(members(list)).toEqual([]);
    list.add(a);
    expect(members(list)).toEqual([a]);
  });

  it('visits each relay once while the visit deletes them', () => {
    const list = new RelayList();
    const all = [relay(), relay(), relay()];
    for (const r of all) list.add(r);
    const visited: Relay[] = [];
    list.forEach((r) => {
      visited.push(r);
      list.delete(r);
    });
    expect(visited).toHaveLength(3);
    expect(new Set(visited)).toEqual(new Set(all));
    expect(members(list)).toEqual([]);
  });
});
