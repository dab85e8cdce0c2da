/**
 * A real upstream on 127.0.0.1 that checks the credentials it receives the way
 * its profile does: openai `Authorization: Bearer`, anthropic `x-api-key` with
 * `anthropic-version`. Keys can be changed while it runs (rotation tests).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { closeServer, listenLocal, refusedUrl } from '../support/local-server.js';
import { randomBytes } from 'node:crypto';
import { SECRET_MARKER } from '../security/secret-marker.js';

export { SECRET_MARKER };

export function testProviderKey(label = 'key'): string {
  return `${SECRET_MARKER}-${label}-${randomBytes(12).toString('base64url')}`;
}

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

export interface FakeUpstream {
  url: string;
  profile: 'openai' | 'anthropic';
  keys: Set<string>;
  received: ReceivedRequest[];
  /** When set, requests wait this long before any answer (timeout tests). */
  delayMs: number;
  /** When set, every request gets this status (unexpected answers). */
  forceStatus: number | undefined;
  /** When set, every request gets a 200 with this content type and body (not a provider). */
  forceBody: { contentType: string; body: string } | undefined;
  close(): Promise<void>;
}

export async function startFakeUpstream(profile: 'openai' | 'anthropic', keys: string[]): Promise<FakeUpstream> {
  const state = {
    keys: new Set(keys),
    received: [] as ReceivedRequest[],
    delayMs: 0,
    forceStatus: undefined as number | undefined,
    forceBody: undefined as { contentType: string; body: string } | undefined,
  };
  const server: Server = createServer((req, res) => {
    state.received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const answer = () => {
      if (res.destroyed) return;
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (state.forceStatus) return json(state.forceStatus, { error: { message: 'forced' } });
      if (state.forceBody) {
        res.writeHead(200, { 'content-type': state.forceBody.contentType });
        return res.end(state.forceBody.body);
      }
      const presented =
        profile === 'openai'
          ? /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]
          : req.headers['anthropic-version']
            ? (req.headers['x-api-key'] as string | undefined)
            : undefined;
      if (!presented || !state.keys.has(presented)) {
        // Like the real providers: no echo of the key presented.
        return json(401, { error: { type: 'authentication_error', message: 'invalid api key' } });
      }
      if (req.method === 'GET' && req.url === '/v1/models') {
        return json(200, { object: 'list', data: [{ id: 'test-model', object: 'model' }] });
      }
      return json(404, { error: { message: `no route ${req.method} ${req.url}` } });
    };
    if (state.delayMs > 0) setTimeout(answer, state.delayMs).unref();
    else answer();
  });
  const upstream: FakeUpstream = {
    url: await listenLocal(server),
    profile,
    get keys() {
      return state.keys;
    },
    get received() {
      return state.received;
    },
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(v: number) {
      state.delayMs = v;
    },
    get forceStatus() {
      return state.forceStatus;
    },
    set forceStatus(v: number | undefined) {
      state.forceStatus = v;
    },
    get forceBody() {
      return state.forceBody;
    },
    set forceBody(v: { contentType: string; body: string } | undefined) {
      state.forceBody = v;
    },
    close: () => closeServer(server),
  };
  return upstream;
}

export { refusedUrl };
