/**
 * A connection's health: the upstream probed with its stored key (outside any transaction), the outcome
 * recorded, and a change of health announced once (provider_connection.unhealthy / .recovered).
 */
import type { Queryable } from '../../db/database.js';
import type { Actor } from '../actor.js';
import { archived, get, lockForChange, RESOURCE, type ProviderConnectionDeps } from './provider-connection-lookup.js';
import type { ProtocolProfile } from '../../protocols/index.js';
import type { ProviderConnectionRow } from './provider-connection-repo.js';
import { probeProvider, type ProviderCheckResult } from './provider-probe.js';
import { openProviderApiKey } from './provider-secret.js';
import { windowFigures, type WindowFigures } from './connection-health-repo.js';

export function probe(
  { config, clock }: Pick<ProviderConnectionDeps, 'config' | 'clock'>,
  profile: ProtocolProfile,
  baseUrl: string,
  apiKey: string,
): Promise<ProviderCheckResult> {
  return probeProvider({
    profile,
    baseUrl,
    apiKey,
    timeoutMs: config.providerProbeTimeoutMs,
    allowPrivate: config.allowPrivateUpstreams,
    now: () => clock.now(),
  });
}

/**
 * provider_connection.unhealthy when a verification fails after a healthy (or unknown) state, .recovered when
 * one succeeds after an unhealthy one: the health last announced is kept on the row, so each change is told once.
 */
async function announceHealth(
  { providerConnectionRepo: repo, events }: ProviderConnectionDeps,
  row: ProviderConnectionRow,
  result: ProviderCheckResult,
  tx: Queryable,
): Promise<void> {
  const health = result.outcome === 'reachable' ? 'HEALTHY' : 'UNHEALTHY';
  if (health === (row.event_health ?? 'HEALTHY')) {
    if (!row.event_health) await repo.update(row.id, { event_health: health }, tx);
    return;
  }
  await repo.update(row.id, { event_health: health }, tx);
  if (health === 'UNHEALTHY') {
    await events.emit(tx, row.workspace_id, 'provider_connection.unhealthy', {
      providerConnectionId: row.id,
      source: 'verification',
      outcome: result.outcome,
      ...(result.httpStatus !== undefined ? { httpStatus: result.httpStatus } : {}),
    });
  } else {
    await events.emit(tx, row.workspace_id, 'provider_connection.recovered', { providerConnectionId: row.id, source: 'verification' });
  }
}

/**
 * Probes with the stored key (outside any transaction), then records the
 * outcome; success sets lastVerifiedAt, unless the key or baseUrl changed
 * while the probe ran (the result would be about the old ones).
 */
export async function verify(deps: ProviderConnectionDeps, actor: Actor, id: string): Promise<ProviderCheckResult> {
  const { db, providerConnectionRepo: repo, workspaces, audit, secretBox } = deps;
  const row = await get(deps, actor, id);
  // Refused before the probe, as lockForChange would refuse after it.
  await workspaces.requireWritableBeforeCall(actor, row.workspace_id);
  if (row.status === 'ARCHIVED') throw archived(row);
  const result = await probe(deps, row.protocol_profile, row.base_url, openProviderApiKey(secretBox, row));
  await db.transaction(async (tx) => {
    const current = await lockForChange(deps, actor, id, tx);
    const unchanged = current.api_key_ciphertext === row.api_key_ciphertext && current.base_url === row.base_url;
    const verified = result.outcome === 'reachable' && unchanged;
    // The outcome, passed or failed, is the connection's while its key and upstream are those probed.
    if (unchanged) await repo.update(id, { last_verify_outcome: result.outcome, last_verify_at: result.checkedAt }, tx);
    if (verified) await repo.update(id, { last_verified_at: result.checkedAt }, tx);
    if (unchanged) await announceHealth(deps, current, result, tx);
    await audit.record(
      actor,
      {
        action: 'provider_connection.verified',
        resourceType: RESOURCE,
        resourceId: id,
        workspaceId: current.workspace_id,
        changes: {
          outcome: result.outcome,
          ...(result.httpStatus !== undefined ? { httpStatus: result.httpStatus } : {}),
          ...(verified ? { lastVerifiedAt: result.checkedAt.toISOString() } : {}),
        },
      },
      tx,
    );
  });
  return result;
}

type ConnectionStatus = 'healthy' | 'degraded' | 'failing' | 'idle';

export interface ConnectionHealth {
  connection: ProviderConnectionRow;
  status: ConnectionStatus;
  windows: WindowFigures[];
  checkedAt: Date;
}

/**
 * The status the console colours a connection by: a failed verification is failing whatever the traffic (the key
 * or upstream is wrong now); else the last 5 minutes' attempts decide, at least 5 of them for `failing`.
 */
function connectionStatus(lastVerifyOutcome: string | null | undefined, recent: WindowFigures): ConnectionStatus {
  if (lastVerifyOutcome && lastVerifyOutcome !== 'reachable') return 'failing';
  if (recent.attempts === 0) return 'idle';
  if (recent.attempts >= 5 && recent.errors * 2 >= recent.attempts) return 'failing';
  if (recent.errors * 20 >= recent.attempts && recent.errors > 0) return 'degraded';
  return 'healthy';
}

/** The connection's attempts over the last 5 minutes, hour and day, direct and through routes, and its status. */
export async function health(deps: ProviderConnectionDeps, actor: Actor, id: string): Promise<ConnectionHealth> {
  const connection = await get(deps, actor, id);
  const checkedAt = deps.clock.now();
  const figures = await windowFigures(deps.db, { workspaceId: connection.workspace_id, connectionIds: [connection.id] }, checkedAt);
  const windows = figures.get(connection.id)!;
  return { connection, status: connectionStatus(connection.last_verify_outcome, windows[0]!), windows, checkedAt };
}
