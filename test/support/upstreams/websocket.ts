/**
 * What the fake WebSocket upstreams share (realtime.ts, gemini-live.ts): the HTTP server on 127.0.0.1 that answers
 * plain HTTP with an error, its handshakes screened, each accepted socket tracked until it closes, and a close that
 * cuts them all; a turn's usage by kind, and the latest session's turn the provider starts on its own. A protocol's
 * module speaks its messages on each socket.
 */
import { createServer, type IncomingMessage } from 'node:http';
import { WebSocketServer, type ServerOptions, type WebSocket } from 'ws';
import { closeServer, listenLocal } from '../local-server.js';

/** A turn's usage: its input and output tokens, and of them the cached, audio and cached audio ones (0 unless set). */
export interface TurnUsage {
  input: number;
  output: number;
  cached?: number;
  audioIn?: number;
  cachedAudio?: number;
  audioOut?: number;
}

/** A usage with each optional count set (0 where it was not). */
export const withZeros = (u: TurnUsage): Required<TurnUsage> => ({
  ...u,
  cached: u.cached ?? 0,
  audioIn: u.audioIn ?? 0,
  cachedAudio: u.cachedAudio ?? 0,
  audioOut: u.audioOut ?? 0,
});

/** The latest session's turn started on its own (server VAD): `set` by each new session, `start` false when none is. */
export function latestSessionTurn() {
  let latest: (() => void) | undefined;
  return {
    set: (turn: () => void) => (latest = turn),
    start: () => {
      if (!latest) return false;
      latest();
      return true;
    },
  };
}

export interface WebSocketUpstream {
  url: string;
  /** The sockets open now. */
  sockets: Set<WebSocket>;
  close(): Promise<void>;
}

/** A handshake's answer: the raw HTTP response that refuses it, or what serves its socket once accepted. */
type Handshake = string | ((ws: WebSocket) => void);

/**
 * A WebSocket server for a fake upstream: plain HTTP answered 400 with `httpError` (a JSON body), each handshake
 * answered by `handshake`; an accepted socket's errors are ignored.
 */
export async function startWebSocketUpstream(options: {
  httpError: string;
  handleProtocols?: ServerOptions['handleProtocols'];
  handshake(req: IncomingMessage, url: URL): Handshake;
}): Promise<WebSocketUpstream> {
  const http = createServer((_req, res) => {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(options.httpError);
  });
  const wss = new WebSocketServer({ noServer: true, ...(options.handleProtocols ? { handleProtocols: options.handleProtocols } : {}) });
  const sockets = new Set<WebSocket>();
  http.on('upgrade', (req, socket, head) => {
    const answer = options.handshake(req, new URL(req.url!, 'http://x'));
    if (typeof answer === 'string') {
      socket.end(answer);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws);
      ws.on('close', () => sockets.delete(ws));
      ws.on('error', () => {});
      answer(ws);
    });
  });
  return {
    url: await listenLocal(http),
    sockets,
    close: async () => {
      for (const s of sockets) s.terminate();
      wss.close();
      await closeServer(http);
    },
  };
}
