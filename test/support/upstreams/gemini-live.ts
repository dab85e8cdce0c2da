/**
 * A fake Gemini Live API upstream: a real WebSocket server (ws) on 127.0.0.1 at
 * `/ws/google.ai.generativelanguage.{v1beta|v1alpha}.GenerativeService.BidiGenerateContent`, checking the key as
 * Google does (`x-goog-api-key`, or `?key=`), speaking the documented messages, every server message a binary frame
 * holding its JSON (as the service sends them):
 *   - the client's first message must be `setup` (else the socket closes 1007); answered `setupComplete`;
 *   - `clientContent` with `turnComplete: true` → a turn: `chunks` pairs of `serverContent.modelTurn` messages (one
 *     text part, one audio `inlineData` part), then `serverContent.turnComplete` with the next `usageMetadata` of
 *     `usages` (or a default); `realtimeInput` (audio) is counted, nothing answered;
 *   - `startTurn()` → a turn on the latest session no client message asked for (the provider's voice activity
 *     detection).
 * As the API does, a turn's `responseTokenCount` stops at the setup's `generationConfig.maxOutputTokens`.
 * Per turn, `behaviour` (shifted at each turn): 'hang' (its output, then nothing), 'drop' (its output, then the socket
 * is destroyed), 'usageApart' (its usage in a message of its own after `turnComplete`).
 */
import type { IncomingMessage } from 'node:http';
import type { WebSocket } from 'ws';
import { latestSessionTurn, startWebSocketUpstream, withZeros, type TurnUsage, type WebSocketUpstream } from './websocket.js';

export type LiveUsage = TurnUsage;

export interface FakeLive extends WebSocketUpstream {
  /** The client messages received, each with its one key, in order. */
  messages: { key: string; body: Record<string, any> }[];
  handshakes: { url: string; headers: IncomingMessage['headers'] }[];
  usages: LiveUsage[];
  behaviour: ('normal' | 'hang' | 'drop' | 'usageApart')[];
  /** Pairs of output messages per turn (text, then audio). */
  chunks: number;
  /** Starts a turn on the latest session on its own (server VAD); false when none is open. */
  startTurn(): boolean;
}

const PATH = /^\/ws\/google\.ai\.generativelanguage\.v1(?:alpha|beta)\.GenerativeService\.BidiGenerateContent$/;

/** `usageMetadata` as the Live API reports it: counts, and the input, cache and response by modality. */
function usageMetadata(u: LiveUsage) {
  const { input, output, cached, audioIn, cachedAudio, audioOut } = withZeros(u);
  return {
    promptTokenCount: input,
    ...(cached ? { cachedContentTokenCount: cached } : {}),
    responseTokenCount: output,
    totalTokenCount: input + output,
    promptTokensDetails: [
      { modality: 'TEXT', tokenCount: input - audioIn },
      { modality: 'AUDIO', tokenCount: audioIn },
    ],
    ...(cached
      ? {
          cacheTokensDetails: [
            { modality: 'TEXT', tokenCount: cached - cachedAudio },
            { modality: 'AUDIO', tokenCount: cachedAudio },
          ],
        }
      : {}),
    responseTokensDetails: [
      { modality: 'TEXT', tokenCount: output - audioOut },
      { modality: 'AUDIO', tokenCount: audioOut },
    ],
  };
}

export async function startGeminiLiveUpstream(options: { apiKey: string }): Promise<FakeLive> {
  const latest = latestSessionTurn();
  const fake: Omit<FakeLive, keyof WebSocketUpstream> = {
    messages: [],
    handshakes: [],
    usages: [],
    behaviour: [],
    chunks: 2,
    startTurn: latest.start,
  };
  const server = await startWebSocketUpstream({
    httpError: '{"error":{"code":400,"message":"WebSocket only","status":"INVALID_ARGUMENT"}}',
    handshake: (req, url) => {
      fake.handshakes.push({ url: req.url!, headers: req.headers });
      const key = req.headers['x-goog-api-key'] ?? url.searchParams.get('key');
      if (key !== options.apiKey) return 'HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n';
      if (!PATH.test(url.pathname)) return 'HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n';
      return serve;
    },
  });

  function serve(ws: WebSocket): void {
    const send = (message: Record<string, unknown>) => {
      if (ws.readyState === ws.OPEN) ws.send(Buffer.from(JSON.stringify(message)), { binary: true });
    };
    let setup: Record<string, any> | undefined;
    const turn = () => {
      const behaviour = fake.behaviour.shift() ?? 'normal';
      for (let i = 0; i < fake.chunks; i++) {
        send({ serverContent: { modelTurn: { parts: [{ text: `part ${i}` }] } } });
        send({
          serverContent: {
            modelTurn: { parts: [{ inlineData: { mimeType: 'audio/pcm;rate=24000', data: Buffer.alloc(960, 7).toString('base64') } }] },
          },
        });
      }
      if (behaviour === 'hang') return;
      if (behaviour === 'drop') {
        ws.terminate();
        return;
      }
      const u = fake.usages.shift() ?? { input: 10, output: 10 };
      const cap = setup?.generationConfig?.maxOutputTokens as number | undefined;
      const usage = usageMetadata({ ...u, output: cap !== undefined && u.output > cap ? cap : u.output });
      if (behaviour === 'usageApart') {
        send({ serverContent: { turnComplete: true } });
        send({ usageMetadata: usage });
      } else send({ serverContent: { turnComplete: true }, usageMetadata: usage });
    };
    latest.set(turn);
    ws.on('message', (data: Buffer) => {
      const body = JSON.parse(data.toString('utf8')) as Record<string, any>;
      const key = Object.keys(body)[0] ?? '';
      fake.messages.push({ key, body });
      if (!setup) {
        if (key !== 'setup') return ws.close(1007, 'setup must be the first message');
        setup = body.setup as Record<string, unknown>;
        return send({ setupComplete: {} });
      }
      if (key === 'clientContent' && body.clientContent?.turnComplete === true) turn();
    });
  }

  return Object.assign(fake, server);
}
