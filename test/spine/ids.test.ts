/**
 * src/ids.ts: UUID v7 from pooled randomness. Valid v7 with the RFC 9562
 * variant, unique, and in creation order (keyset paging relies on it).
 */
import { describe, expect, it } from 'vitest';
import { v7 as referenceV7 } from 'uuid';
import { isUuidV7, newId } from '../../src/ids.js';

describe('newId', () => {
  it('makes valid, unique v7 ids in the order they were made, across millisecond boundaries and the random pool', () => {
    const ids: string[] = [];
    const end = Date.now() + 30;
    while (Date.now() < end || ids.length < 5000) ids.push(newId());
    expect(ids.every(isUuidV7)).toBe(true);
    expect(ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
  });

  it('carries the current time in its first 48 bits, like the uuid package does', () => {
    const before = Date.now();
    const id = newId();
    const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(Date.now() + 1);
    expect(id.slice(0, 13) <= referenceV7().slice(0, 13)).toBe(true);
  });
});
