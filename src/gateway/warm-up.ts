/**
 * What a fresh process does before /readyz says ready, so that its first calls do not pay for it (docs/performance.md,
 * "A fresh process"): the gateway pool's connections opened (each a PostgreSQL backend started and authenticated,
 * which the first burst of calls otherwise waited for; each settles on its plans of the gateway's named statements as
 * the pool opens it, gateway-db.ts), and the protocol's part of a call run on a canned chat completion
 * (its request read with the input estimate, its upstream headers, its JSON and streamed answers read), so that V8 has
 * compiled them before a client's call runs them. The call's HTTP on both sides is warmed by
 * src/warm-http.ts.
 *
 * Nothing here writes a row or touches a quota, and a failure is not the start's: a connection that cannot
 * be opened now is opened by the first call that needs it, as without the warm-up.
 */
import type pg from 'pg';
import type { Db } from '../db/database.js';
import { isEmbedded } from '../db/database.js';
import { protocolOf } from '../protocols/index.js';
import { prepareCall, usageFromJson } from '../protocols/inspectors.js';
import { upstreamHeaders } from './headers.js';
import { SseMeter } from './sse-meter.js';

/** Rounds of the canned call's protocol part: enough for V8 to compile its functions (they run while the connections open). */
const PROTOCOL_ROUNDS = 500;

/**
 * Opens up to `count` of `db`'s pooled connections at once (each settling on its plans as it opens, where the pool
 * does that: gateway-db.ts), then gives them back to the pool idle (PostgreSQL only).
 */
export async function openConnections(db: Db, count: number): Promise<number> {
  if (isEmbedded(db) || count <= 0) return 0;
  const client = db.client as { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };
  const acquired = await Promise.allSettled(Array.from({ length: count }, () => client.acquireConnection()));
  const opened = acquired.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
  await Promise.all(opened.map((connection) => client.releaseConnection(connection)));
  return opened.length;
}

const CHAT = '/v1/chat/completions';
const REQUEST_HEADERS = ['host', 'nexus', 'content-type', 'application/json', 'authorization', 'Bearer nx-warm-up'];
const CAPS = { maxOutputTokens: 4096, clamp: true };

function chatRequest(stream: boolean): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: 'warm-up',
      messages: [
        { role: 'system', content: 'You answer briefly.' },
        { role: 'user', content: 'What does a gateway count before it calls the model, and why?' },
      ],
      max_tokens: 64,
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  );
}

const ANSWER = JSON.stringify({
  id: 'chatcmpl-warm-up',
  object: 'chat.completion',
  model: 'warm-up',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Its input.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 24, completion_tokens: 3, total_tokens: 27 },
});

const EVENTS = Buffer.from(
  [
    { choices: [{ index: 0, delta: { role: 'assistant', content: 'Its' } }] },
    { choices: [{ index: 0, delta: { content: ' input.' }, finish_reason: 'stop' }] },
    { choices: [], usage: { prompt_tokens: 24, completion_tokens: 3, total_tokens: 27 } },
  ]
    .map((event) => `data: ${JSON.stringify({ id: 'chatcmpl-warm-up', object: 'chat.completion.chunk', model: 'warm-up', ...event })}\n\n`)
    .join('') + 'data: [DONE]\n\n',
);

/** The protocol's part of an OpenAI chat completion, JSON and streamed, PROTOCOL_ROUNDS times. */
export function warmProtocol(): void {
  const protocol = protocolOf('openai');
  const inspector = protocol.inspectorFor('POST', CHAT);
  if (!inspector) return;
  const json = chatRequest(false);
  const stream = chatRequest(true);
  for (let i = 0; i < PROTOCOL_ROUNDS; i++) {
    prepareCall(inspector, json, CAPS);
    const bounds = prepareCall(inspector, stream, CAPS);
    upstreamHeaders(REQUEST_HEADERS, protocol, 'sk-warm-up', json.length);
    usageFromJson(inspector, ANSWER);
    new SseMeter(inspector, bounds).push(EVENTS);
  }
}

/** The canned call, for the warm-up of its HTTP (src/warm-http.ts): its path, its request, its JSON and streamed answers. */
export const CANNED_CALL = { path: CHAT, request: chatRequest, answer: ANSWER, events: EVENTS };
