/**
 * A batch of calls as the gateway's recorder hands them to its record statement (src/domain/recording/record-sql.ts),
 * for the benches that time that statement (bench-rollup.ts, bench-history.ts).
 */
import { callRows, type CallRows } from '../../src/records/call-rows.js';
import { invocationRecord, NOTHING_READ } from '../../src/records/invocation-record.js';
import { newId } from '../../src/ids.js';
import type pg from 'pg';
import { createModelPrice } from '../../test/support/sdk.js';
import { adminClient, provisionTenant, type Tenant } from '../../test/support/tenant.js';

export const MODELS = ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'o3-mini'];

/** A tenant of `users` end users with quota to spare, its models priced (gpt-4o*: $2.50 and $10 a million), as the benches record for. */
export async function pricedTenant(serverUrl: string, rootKey: string, name: string, users: number): Promise<Tenant> {
  const api = adminClient(serverUrl, rootKey);
  const tenant = await provisionTenant(api, {
    name,
    baseUrl: 'http://127.0.0.1:9',
    providerKey: `sk-${name}-0123456789`,
    users,
    quotaUnits: 1_000_000_000_000n,
  });
  const price = await createModelPrice({
    client: api,
    path: { workspaceId: tenant.workspaceId },
    body: {
      modelPattern: 'gpt-4o*',
      inputPerMillion: '2.50',
      outputPerMillion: '10',
      effectiveFrom: new Date(Date.now() - 3_600_000).toISOString(),
    },
  });
  if (price.response.status !== 201) throw new Error(`createModelPrice: ${price.response.status}`);
  return tenant;
}

/** A batch of calls as the gateway's recorder hands them to its statement: most answered and charged. */
export function batchOf(
  tenant: Pick<Tenant, 'workspaceId' | 'connectionId' | 'users'>,
  leases: Map<string, string>,
  planId: string,
  n: number,
): CallRows[] {
  const rows: CallRows[] = [];
  for (let i = 0; i < n; i++) {
    const user = tenant.users[Math.floor(Math.random() * tenant.users.length)]!;
    const model = MODELS[i % MODELS.length]!;
    const now = new Date();
    const opened = {
      id: newId(),
      workspaceId: tenant.workspaceId,
      accessId: user.accessId,
      connectionId: tenant.connectionId,
      keyId: user.apiKeyId,
      planId,
      // Time-ordered, as the gateway's (src/http/middleware.ts).
      requestId: newId(),
      traceId: null,
      method: 'POST',
      endpoint: 'v1/chat/completions',
      startedAt: new Date(now.getTime() - 40),
      metered: true,
    };
    // One call in ten refused before the provider, one in twenty an upstream error; the rest answered.
    if (i % 10 === 9) {
      const refused = invocationRecord(opened, NOTHING_READ, {
        upstream: false,
        status: 'REJECTED',
        errorCode: 'model_not_allowed',
        errorMessage: "The model 'gpt-bench' is not allowed on this plan",
        completedAt: now,
        totalLatencyMs: 1,
      });
      rows.push(callRows({ invocation: refused, lease: undefined, consumed: null }));
      continue;
    }
    const failed = i % 20 === 4;
    const input = 200n + BigInt(i);
    const output = failed ? 0n : 50n + BigInt(i);
    const units = failed ? 0n : input + 2n * output;
    const invocation = invocationRecord(
      opened,
      { requestedModel: model, streamed: false, leaseId: leases.get(user.accessId)! },
      {
        upstream: true,
        status: failed ? 'UPSTREAM_ERROR' : 'SUCCEEDED',
        errorCode: null,
        quotaUnits: units,
        completedAt: now,
        totalLatencyMs: 40,
        upstreamResponseId: null,
        attemptId: newId(),
        attemptStatus: failed ? 'UPSTREAM_ERROR' : 'SUCCEEDED',
        upstreamModel: `${model}-2025-01-01`,
        httpStatus: failed ? 500 : 200,
        attemptStartedAt: opened.startedAt,
        attemptDurationMs: 39,
        providerLatencyMs: 39,
        providerTtftMs: null,
        totalTtftMs: null,
      },
    );
    rows.push(
      callRows({
        invocation,
        lease: { id: leases.get(user.accessId)!, bound: 10_000n, take: 0n },
        consumed: failed
          ? null
          : {
              units,
              inputTokens: input,
              cachedInputTokens: 0n,
              outputTokens: output,
              model: `${model}-2025-01-01`,
              pricing: { rule: null, inputMultiplierPpm: 1_000_000n, cachedInputMultiplierPpm: 500_000n, outputMultiplierPpm: 2_000_000n },
            },
      }),
    );
  }
  return rows;
}

/**
 * A held quota lease per user, as a gateway process holds one (nothing reserved: the calls recorded against it take
 * nothing from it), named by `requestId`.
 */
export async function openLeases(client: pg.Client, tenant: Pick<Tenant, 'users'>, requestId: string): Promise<Map<string, string>> {
  const leases = new Map<string, string>();
  for (const user of tenant.users) {
    const id = newId();
    await client.query(
      `insert into quota_leases (id, workspace_id, workspace_access_id, quota_period_id, reserved_units, consumed_units, status,
                                 request_id, created_at, expires_at)
       select $1, workspace_id, workspace_access_id, id, 0, 0, 'HELD', $3, now(), now() + interval '1 day'
         from quota_periods where workspace_access_id = $2 order by period_start desc limit 1`,
      [id, user.accessId, requestId],
    );
    leases.set(user.accessId, id);
  }
  return leases;
}

/**
 * The leases `openLeases` opened under `requestId` and still HELD, RELEASED, as a gateway process releases a lease idle
 * for a second (nothing reserved: nothing to give back). On a database kept between runs (bench:history's) a run's
 * leases would otherwise stay HELD for their day, and the record statement's lease update in every later run would read
 * them too, with the versions of their rows its updates left where nothing vacuums the table. Returns how many.
 */
export async function releaseLeases(client: pg.Client, requestId: string): Promise<number> {
  const result = await client.query(
    `update quota_leases set status = 'RELEASED', settled_at = now() where request_id = $1 and status = 'HELD'`,
    [requestId],
  );
  return result.rowCount ?? 0;
}
