/** `npm run faults`, scenario 6: a route's target cut and restored under load. */
import { createProviderConnection, createRoute } from '../../test/support/sdk.js';
import { adminClient } from '../../test/support/tenant.js';
import { startTcpProxy } from '../lib/tcp-proxy.js';
import {
  PROVIDER_KEY,
  ROOT_KEY,
  accountOf,
  callOnce,
  db,
  nexus,
  period,
  produce,
  recorded,
  sleep,
  statusLine,
  tenant,
  until,
  type Answer,
  type Row,
} from './common.js';

// ---- 6. a route's target killed and restarted under load ------------------------------------------
export async function routeScenario(upstream: string): Promise<Row> {
  const target = new URL(upstream);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  const r = await nexus();
  const t = await tenant(r, upstream, 100_000_000);
  const client = adminClient(r.url, ROOT_KEY);
  const proxied = await createProviderConnection({
    client,
    path: { workspaceId: t.workspaceId },
    body: { name: 'through the proxy', protocolProfile: 'openai', baseUrl: `http://127.0.0.1:${proxy.port}`, apiKey: PROVIDER_KEY },
  });
  const cooldownMs = 2000;
  const route = await createRoute({
    client,
    path: { workspaceId: t.workspaceId },
    body: {
      name: 'faults',
      strategy: 'loadbalance',
      targets: [
        { providerConnectionId: proxied.data!.id, timeoutMs: 2000 },
        { providerConnectionId: t.connectionId, timeoutMs: 2000 },
      ],
      breaker: { consecutiveFailures: 3, cooldownMs },
    },
  });
  if (route.response.status !== 201) throw new Error(`createRoute: ${route.response.status} ${JSON.stringify(route.error)}`);
  const url = `${r.url}/providers/${route.data!.id}/v1/chat/completions`;
  const breakerOf = async () => {
    const { rows } = await db.query('select state from route_breakers where route_id = $1 and provider_connection_id = $2', [
      route.data!.id,
      proxied.data!.id,
    ]);
    return (rows[0] as { state: string } | undefined)?.state ?? 'closed';
  };
  await sleep(500); // the process reads its routes every 250 ms
  const answers: { phase: 'before' | 'during' | 'after'; answer: Answer }[] = [];
  let phase: 'before' | 'during' | 'after' = 'before';
  let stop = false;
  const clients = Array.from({ length: 8 }, async () => {
    while (!stop) {
      const answer = await callOnce(url, t.apiKey, { headers: produce(10) });
      answers.push({ phase, answer });
      if (answer.status !== 200) await sleep(50);
    }
  });
  await sleep(3000);
  phase = 'during';
  await proxy.cut();
  await sleep(10_000);
  const opened = await breakerOf();
  await proxy.restore();
  phase = 'after';
  const closedAfter = await until(async () => (await breakerOf()) === 'closed', 30_000);
  await sleep(1000);
  stop = true;
  await Promise.all(clients);
  const delivered = answers.filter((x) => x.answer.status === 200);
  await until(async () => (await recorded(t.accessId)).length >= answers.length, 60_000);
  await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.answer.requestId!),
  );
  await r.stop();
  await proxy.close();
  const failed = answers.filter((x) => x.answer.status !== 200).length;
  return {
    scenario: `route: loadbalanced over 2 targets under load (8 clients), one cut 10 s and restored (cooldown ${cooldownMs} ms)`,
    ...account,
    freedAfter:
      closedAfter === null
        ? 'breaker still open after 30 s'
        : `breaker (${opened} during the cut) closed ${closedAfter} ms after the restore`,
    statuses: `failed calls: ${failed}; during: ${statusLine(answers.filter((x) => x.phase === 'during').map((x) => x.answer))}; all: ${statusLine(answers.map((x) => x.answer))}`,
  };
}
