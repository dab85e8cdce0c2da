// This file is copied from scripts/client-package/webhooks.ts by `npm run generate`: edit it there.

/**
 * The check of a webhook Nexus sent, for a receiver: `nexus.webhooks.verify(body, headers, secret)`.
 *
 * Nexus signs each delivery as Standard Webhooks says (`webhook-id`, `webhook-timestamp`, `webhook-signature`: an
 * HMAC-SHA256 of `id.timestamp.body` under the endpoint's `whsec_` secret, one signature per valid secret during a
 * rotation). verify() checks it with the `standardwebhooks` package, refuses a timestamp more than 5 minutes away
 * from now (a replay), and gives the event, typed by its `type`.
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { InvalidWebhookSignatureError, NexusConfigurationError } from './errors.js';
import { NexusResource } from './runtime.js';
import type { WebhookEvent } from './types.gen.js';

/** A request's headers as a receiver has them: fetch's Headers, or Node's `req.headers`. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/** What the webhooks resource (`nexus.webhooks`) adds to the operations of the contract. */
export class WebhookVerifier extends NexusResource {
  /**
   * Checks a delivery's signature and gives its event; throws an InvalidWebhookSignatureError when the signature
   * does not match the body, a header is missing, or the timestamp is more than 5 minutes away.
   *
   *   app.post('/nexus/webhooks', express.raw({ type: 'application/json' }), (req, res) => {
   *     const event = nexus.webhooks.verify(req.body, req.headers, process.env.NEXUS_WEBHOOK_SECRET!);
   *     if (event.type === 'quota.threshold_crossed') console.log(event.data.thresholdPercent);
   *     res.sendStatus(204);
   *   });
   *
   * @param payload The body exactly as received (a string or its bytes): parsed and serialized again, it no longer matches.
   * @param headers The request's headers.
   * @param secret The endpoint's signing secret (`whsec_...`), as createEndpoint or rotateEndpointSecret gave it.
   */
  verify(payload: string | Uint8Array, headers: WebhookHeaders, secret: string): WebhookEvent {
    let webhook: Webhook;
    try {
      webhook = new Webhook(secret);
    } catch (error) {
      throw new NexusConfigurationError("secret must be the webhook endpoint's signing secret (whsec_...)", { cause: error });
    }
    const body = typeof payload === 'string' ? payload : new TextDecoder().decode(payload);
    try {
      return webhook.verify(body, headerRecord(headers)) as WebhookEvent;
    } catch (error) {
      if (error instanceof WebhookVerificationError) {
        throw new InvalidWebhookSignatureError(`The webhook's signature does not verify: ${error.message}`, { cause: error });
      }
      throw error;
    }
  }
}

function headerRecord(headers: WebhookHeaders): Record<string, string> {
  const record: Record<string, string> = {};
  if (headers instanceof Headers) {
    headers.forEach((value, name) => (record[name] = value));
    return record;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) record[name.toLowerCase()] = Array.isArray(value) ? value.join(' ') : value;
  }
  return record;
}
