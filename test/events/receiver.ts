/**
 * A webhook receiver on 127.0.0.1, as an application would write one: it verifies each delivery with the
 * `standardwebhooks` package and keeps what came. How it answers is set per test (`answer`), to play a
 * receiver that is down, gone, redirecting, rate-limited or hanging.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { closeServer, listenLocal } from '../support/local-server.js';

interface Delivery {
  id: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** What `standardwebhooks` verified with the secret the test gave (undefined: it refused the signature). */
  verified: { type: string; timestamp: string; data: Record<string, unknown> } | undefined;
  /** The status this receiver answered. */
  status: number;
}

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** The secrets the receiver verifies with (the first that verifies counts). */
  secrets: string[];
  /** Answers each request; default 200. Returning null leaves it hanging. */
  answer: (d: Omit<Delivery, 'status'>, res: ServerResponse) => number | null;
  /** Deliveries it accepted (2xx) with a valid signature, in order. */
  accepted(): Delivery[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const receiver: Receiver = {
    url: '',
    deliveries: [],
    secrets: [],
    answer: () => 200,
    accepted: () => receiver.deliveries.filter((d) => d.status >= 200 && d.status < 300 && d.verified),
    async close() {
      for (const res of hanging) res.destroy();
      await closeServer(server);
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let verified: Delivery['verified'];
      for (const secret of receiver.secrets) {
        try {
          verified = new Webhook(secret).verify(body, req.headers as Record<string, string>) as Delivery['verified'];
          break;
        } catch {
          // not this secret
        }
      }
      const seen = { id: String(req.headers['webhook-id']), headers: req.headers, body, verified };
      const status = receiver.answer(seen, res);
      if (status === null) {
        hanging.add(res);
        receiver.deliveries.push({ ...seen, status: 0 });
        return;
      }
      receiver.deliveries.push({ ...seen, status });
      if (!res.headersSent) res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(status < 300 ? 'ok' : `answer ${status}`);
    });
  });
  receiver.url = `${await listenLocal(server)}/hooks`;
  return receiver;
}
