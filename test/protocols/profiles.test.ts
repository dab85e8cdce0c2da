/**
 * One list of protocol profiles (src/protocols/index.ts, PROFILES), which the contract and the database hold to:
 * the contract's ProtocolProfile is it, in one schema that every use references (the bundle generated/openapi.json
 * holds no other enum of profiles), and the check the migrations leave on provider_connections.protocol_profile
 * lists it. That check is read from a database the migrations built rather than from their text: an in-memory
 * PGlite (the embedded engine Nexus also runs on) migrated to the latest, the constraint's definition read from
 * pg_constraint, whichever migration wrote it last and however it wrote it.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/db/database.js';
import { migrateLatest } from '../../src/db/migrate.js';
import { PROFILES, protocolOf } from '../../src/protocols/index.js';

const bundle = JSON.parse(readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8'));

/** The JSON pointer of every node of `root` that `hit` picks. */
function pointersOf(root: unknown, hit: (node: Record<string, unknown>) => boolean): string[] {
  const found: string[] = [];
  const pending: [unknown, string][] = [[root, '#']];
  while (pending.length) {
    const [node, at] = pending.pop()!;
    if (!node || typeof node !== 'object') continue;
    if (!Array.isArray(node) && hit(node as Record<string, unknown>)) found.push(at);
    for (const [key, value] of Object.entries(node)) pending.push([value, `${at}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`]);
  }
  return found.sort();
}

describe('the protocol profiles', () => {
  it('list each protocol table under its own profile', () => {
    expect(PROFILES).toEqual(['openai', 'anthropic', 'azure-openai', 'gemini', 'bedrock']);
    for (const profile of PROFILES) expect(protocolOf(profile).profile).toBe(profile);
  });

  it("are the contract's ProtocolProfile, the one enum of profiles, which every use references", () => {
    expect(bundle.components.schemas.ProtocolProfile.enum).toEqual([...PROFILES]);
    const enums = pointersOf(bundle, (node) => Array.isArray(node.enum) && node.enum.some((v) => PROFILES.includes(v)));
    expect(enums).toEqual(['#/components/schemas/ProtocolProfile']);
    // Each field that names a profile (connections, prices) does so by reference.
    expect(pointersOf(bundle, (node) => node.$ref === '#/components/schemas/ProtocolProfile').length).toBeGreaterThanOrEqual(3);
  });

  it("are the database's check of provider_connections.protocol_profile, as the migrations leave it", async () => {
    const db = createDatabase({ databaseUrl: undefined });
    try {
      await migrateLatest(db);
      const { rows } = await db.raw<{ rows: { def: string }[] }>(
        "select pg_get_constraintdef(c.oid) as def from pg_constraint c where c.conname = 'provider_connections_profile_check' and c.conrelid = 'provider_connections'::regclass",
      );
      expect(rows).toHaveLength(1);
      // CHECK ((protocol_profile = ANY (ARRAY['openai'::text, 'anthropic'::text, ...])))
      expect(rows[0]!.def).toMatch(/^CHECK \(\(protocol_profile = ANY \(ARRAY\[/);
      const listed = [...rows[0]!.def.matchAll(/'([^']*)'::text/g)].map((m) => m[1]);
      expect(listed.sort()).toEqual([...PROFILES].sort());
    } finally {
      await db.destroy();
    }
  }, 120_000);
});
