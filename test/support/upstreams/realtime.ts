/**
 * A fake OpenAI Realtime upstream: a real WebSocket server (ws) on 127.0.0.1 at `/v1/realtime?model=...`, checking
 * `Authorization: Bearer` as OpenAI does, speaking the documented events:
 *   - on connect: `session.created` (its session's `max_output_tokens`: 'inf');
 *   - `session.update` → `session.updated` with the fields merged;
 *   - `input_audio_buffer.append` → nothing (counted); `conversation.item.create` → `conversation.item.created`;
 *   - `response.create` → `response.created`, then `deltas` text and audio deltas (and their transcript's), then
 *     `response.done` with the next usage of `usages` (or a default), unless the turn's behaviour says otherwise;
 *   - `input_audio_buffer.commit` → a server-VAD turn: `input_audio_buffer.committed`, then a response as above
 *     that no `response.create` asked for;
 *   - `response.cancel` → the turn in flight ends `cancelled`;
 *   - `startResponse()` → a response on the latest session that no client event asked for (the provider's own voice
 *     activity detection).
 * As the API does, a response's `output_tokens` stop at its cap: its `response.create`'s `max_output_tokens` (beta
 * `max_response_output_tokens`), else the session's.
 * Per turn, `behaviour` (shifted at each response): 'hang' (its deltas, then nothing), 'drop' (its deltas, then the
 * socket is destroyed).
 */
import type { IncomingMessage } from 'node:http';
import type { WebSocket } from 'ws';
import { latestSessionTurn, startWebSocketUpstream, withZeros, type TurnUsage, type WebSocketUpstream } from './websocket.js';

export type RealtimeUsage = TurnUsage;

export interface FakeRealtime extends WebSocketUpstream {
  /** The client events received, by type, in order. */
  events: { type: string; body: Record<string, unknown> }[];
  /** The handshakes' headers. */
  handshakes: IncomingMessage['headers'][];
  /** The usages of the next responses, in order (then a default). */
  usages: RealtimeUsage[];
  /** Behaviours of the next responses, in order ('normal' after). */
  behaviour: ('normal' | 'hang' | 'drop')[];
  /** Deltas per response (each: one text, one audio, one audio transcript delta). */
  deltas: number;
  /** Starts a response on the latest session on its own (server VAD); false when none is open. */
  startResponse(): boolean;
}

/** The usage as `response.done` reports it. */
function usageEvent(u: RealtimeUsage) {
  const { input, output, cached, audioIn, cachedAudio, audioOut } = withZeros(u);
  return {
    total_tokens: input + output,
    input_tokens: input,
    output_tokens: output,
    input_token_details: {
      text_tokens: input - audioIn,
      audio_tokens: audioIn,
      cached_tokens: cached,
      cached_tokens_details: { text_tokens: cached - cachedAudio, audio_tokens: cachedAudio },
    },
    output_token_details: { text_tokens: output - audioOut, audio_tokens: audioOut },
  };
}

/** The model a handshake opens its session on (OpenAI's: Bearer, `/v1/realtime?model=`; Azure's: `api-key`, its paths), or 'unauthorized' or 'not found'. */
function accepts(req: IncomingMessage, url: URL, options: { apiKey: string; azure?: boolean }): string {
  if (options.azure) {
    if (req.headers['api-key'] !== options.apiKey || req.headers.authorization) return 'unauthorized';
    if (url.pathname === '/openai/realtime' && url.searchParams.get('api-version'))
      return url.searchParams.get('deployment') ?? 'not found';
    if (url.pathname === '/openai/v1/realtime') return url.searchParams.get('model') ?? 'not found';
    return 'not found';
  }
  if (req.headers.authorization !== `Bearer ${options.apiKey}`) return 'unauthorized';
  return (url.pathname === '/v1/realtime' && url.searchParams.get('model')) || 'not found';
}

/** `azure`: Azure's paths and `api-key` header instead of OpenAI's. */
export async function startRealtimeUpstream(options: { apiKey: string; azure?: boolean }): Promise<FakeRealtime> {
  let counter = 0;
  const latest = latestSessionTurn();
  const fake: Omit<FakeRealtime, keyof WebSocketUpstream> = {
    events: [],
    handshakes: [],
    usages: [],
    behaviour: [],
    deltas: 3,
    startResponse: latest.start,
  };
  const server = await startWebSocketUpstream({
    httpError: '{"error":{"message":"WebSocket only"}}',
    handleProtocols: (p) => (p.has('realtime') ? 'realtime' : false),
    handshake: (req, url) => {
      fake.handshakes.push(req.headers);
      const model = accepts(req, url, options);
      if (model === 'unauthorized') return 'HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}';
      if (model === 'not found') return 'HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n';
      return (ws) => serve(ws, model);
    },
  });

  function serve(ws: WebSocket, model: string): void {
    let events = 0;
    const send = (type: string, body: Record<string, unknown> = {}) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type, event_id: `event_${++events}`, ...body }));
    };
    const session: Record<string, unknown> = { id: `sess_${++counter}`, object: 'realtime.session', model, max_output_tokens: 'inf' };
    let inFlight: { id: string; cancelled: boolean } | undefined;
    send('session.created', { session });
    latest.set(() => respond());

    /** A positive integer cap, else none ('inf', absent). */
    const capOf = (holder: Record<string, unknown> | undefined) => {
      const cap = holder?.max_output_tokens ?? holder?.max_response_output_tokens;
      return typeof cap === 'number' ? cap : undefined;
    };
    const respond = (asked?: Record<string, unknown>) => {
      const cap = capOf(asked) ?? capOf(session);
      const id = `resp_${++counter}`;
      const turn = { id, cancelled: false };
      inFlight = turn;
      const behaviour = fake.behaviour.shift() ?? 'normal';
      send('response.created', { response: { id, object: 'realtime.response', status: 'in_progress', output: [] } });
      let i = 0;
      const next = () => {
        if (turn.cancelled || ws.readyState !== ws.OPEN) return;
        if (i < fake.deltas) {
          i++;
          send('response.output_text.delta', { response_id: id, item_id: 'item_1', output_index: 0, content_index: 0, delta: 'hi ' });
          send('response.output_audio.delta', { response_id: id, item_id: 'item_1', output_index: 0, content_index: 0, delta: 'AAAAAAAA' });
          send('response.output_audio_transcript.delta', {
            response_id: id,
            item_id: 'item_1',
            output_index: 0,
            content_index: 0,
            delta: 'hi',
          });
          setImmediate(next);
          return;
        }
        if (behaviour === 'hang') return;
        if (behaviour === 'drop') {
          ws.terminate();
          return;
        }
        finish('completed');
      };
      const finish = (status: string) => {
        inFlight = undefined;
        const next = fake.usages.shift() ?? { input: 10, output: 5 };
        const output = cap !== undefined && next.output > cap ? cap : next.output;
        const usage = { ...next, output, audioOut: Math.min(next.audioOut ?? 0, output) };
        send('response.done', { response: { id, object: 'realtime.response', status, output: [], usage: usageEvent(usage) } });
      };
      turn.cancelled = false;
      (turn as { finish?: (s: string) => void }).finish = finish;
      setImmediate(next);
    };

    ws.on('message', (data: Buffer) => {
      const body = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      const type = String(body.type);
      fake.events.push({ type, body });
      if (type === 'session.update') {
        Object.assign(session, body.session as object);
        send('session.updated', { session });
      } else if (type === 'conversation.item.create') {
        send('conversation.item.created', { item: body.item });
      } else if (type === 'input_audio_buffer.commit') {
        send('input_audio_buffer.committed', { item_id: `item_${++counter}` });
        respond();
      } else if (type === 'response.create') {
        respond(body.response as Record<string, unknown> | undefined);
      } else if (type === 'response.cancel' && inFlight) {
        const turn = inFlight as { cancelled: boolean; finish?: (s: string) => void };
        turn.cancelled = true;
        turn.finish?.('cancelled');
      }
    });
  }

  return Object.assign(fake, server);
}
