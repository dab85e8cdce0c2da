/**
 * The workspace's time zone through HTTP: an IANA name, validated (a bad one changes nothing) and audited; the
 * budget's day and month are that zone's, so what a month spent is counted from the zone's midnight, and a new zone
 * moves the window (and a hard level's refusal) at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/actor.js';
import { createWorkspace, getWorkspace, getWorkspaceBudget, listAuditLogs, setWorkspaceBudget, updateWorkspace } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
// 30 November 2026, 12:00 UTC: already 1 December in Kiritimati (UTC+14), still November in UTC.
const NOW = new Date('2026-11-30T12:00:00.000Z');
const clock: Clock = { now: () => new Date(NOW) };

beforeAll(async () => {
  t = await startTestApp({ clock });
});
afterAll(async () => {
  await t?.close();
});

/** Spend recorded in an hour, as the statements that record calls sum it (usage_key_rollups). */
async function spend(workspaceId: string, hour: string, costMicros: number) {
  await t.database.db('usage_key_rollups').insert({
    workspace_id: workspaceId,
    hour: new Date(hour),
    workspace_access_id: crypto.randomUUID(),
    inference_key_id: 'key',
    units: 0,
    input_tokens: 0,
    cached_input_tokens: 0,
    output_tokens: 0,
    events: 1,
    cost_micros: costMicros,
    unpriced_events: 0,
    calls: 1,
    failed_calls: 0,
    refused_calls: 0,
  });
}

/** Until when the gateway refuses the workspace's calls (the budget row its key lookup reads), or null. */
async function refusedUntil(workspaceId: string): Promise<string | null> {
  const row: { hard_exceeded_until: Date | null } = await t.database
    .db('workspace_budgets')
    .where({ workspace_id: workspaceId })
    .first('hard_exceeded_until');
  return row.hard_exceeded_until?.toISOString() ?? null;
}

describe("the workspace's time zone", () => {
  it('is UTC unless set, refuses a name that is not an IANA zone, and audits a change', async () => {
    const ws = (await createWorkspace({ client: t.client, body: { name: 'zones' } })).data!;
    expect(ws.timeZone).toBe('UTC');
    for (const timeZone of ['Mars/Olympus_Mons', '+01:00', 'Europe/Paris; drop table', '']) {
      const res = await t.fetch(`${t.url}/admin/v1/workspaces/${ws.id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${t.config.managementKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ timeZone }),
      });
      expect(res.status, timeZone).toBe(400);
      expect(((await res.json()) as { error: { param?: string; code: string } }).error).toMatchObject({ code: expect.any(String) });
    }
    expect((await getWorkspace({ client: t.client, path: { workspaceId: ws.id } })).data!.timeZone).toBe('UTC');

    const set = await updateWorkspace({ client: t.client, path: { workspaceId: ws.id }, body: { timeZone: 'Europe/Paris' } });
    expect(set.data!.timeZone).toBe('Europe/Paris');
    const audit = await listAuditLogs({ client: t.client, path: { workspaceId: ws.id }, query: { action: 'workspace.updated' } });
    expect(audit.data!.map((a) => a.changes)).toContainEqual({ timeZone: 'Europe/Paris' });

    const created = await createWorkspace({ client: t.client, body: { name: 'zoned', timeZone: 'America/New_York' } });
    expect(created.data!.timeZone).toBe('America/New_York');
    const refused = await t.fetch(`${t.url}/admin/v1/workspaces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.config.managementKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bad zone', timeZone: 'Atlantis/Capital' }),
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { param: string } }).error.param).toBe('timeZone');
  });

  it("counts the budget's month in the workspace's zone, and a new zone moves the window and its hard level at once", async () => {
    const ws = (await createWorkspace({ client: t.client, body: { name: 'budget zones' } })).data!;
    const path = { workspaceId: ws.id };
    // In Kiritimati's December only (its month began at 10:00 UTC on 30 November).
    await spend(ws.id, '2026-11-30T10:00:00Z', 1000);
    // In both Novembers' and Decembers' sight: 12:00 UTC on 30 November.
    await spend(ws.id, '2026-11-30T12:00:00Z', 7);
    // November in both zones' reading, before Kiritimati's December: UTC's only.
    await spend(ws.id, '2026-11-30T09:00:00Z', 20);
    // The start of UTC's November: counted there only.
    await spend(ws.id, '2026-11-01T00:00:00Z', 300);

    const utc = await setWorkspaceBudget({ client: t.client, path, body: { period: 'MONTH', hardLimitMicros: '1100' } });
    expect(utc.data).toMatchObject({
      timeZone: 'UTC',
      windowStart: '2026-11-01T00:00:00.000Z',
      windowEnd: '2026-12-01T00:00:00.000Z',
      spentMicros: '1327',
      hardCrossed: true,
    });
    expect(await refusedUntil(ws.id)).toBe('2026-12-01T00:00:00.000Z');

    // Kiritimati's December has spent 1007: under the hard level, so the gateway no longer refuses.
    await updateWorkspace({ client: t.client, path, body: { timeZone: 'Pacific/Kiritimati' } });
    const kiritimati = await getWorkspaceBudget({ client: t.client, path });
    expect(kiritimati.data).toMatchObject({
      timeZone: 'Pacific/Kiritimati',
      windowStart: '2026-11-30T10:00:00.000Z',
      windowEnd: '2026-12-31T10:00:00.000Z',
      spentMicros: '1007',
      hardCrossed: false,
    });
    expect(await refusedUntil(ws.id)).toBeNull();

    // New York's day (UTC-5) runs from 05:00 UTC: the 20, the 1000 and the 7.
    await updateWorkspace({ client: t.client, path, body: { timeZone: 'America/New_York' } });
    const day = await setWorkspaceBudget({ client: t.client, path, body: { period: 'DAY', hardLimitMicros: '1000' } });
    expect(day.data).toMatchObject({
      windowStart: '2026-11-30T05:00:00.000Z',
      windowEnd: '2026-12-01T05:00:00.000Z',
      spentMicros: '1027',
      hardCrossed: true,
    });
    expect(await refusedUntil(ws.id)).toBe('2026-12-01T05:00:00.000Z');
  });
});
