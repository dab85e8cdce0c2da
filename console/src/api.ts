/**
 * The console's one way to Nexus: the generated typed client (@nexus-gateway/client's entry, bundled), made
 * with the Management Key the operator signed in with. The key lives in sessionStorage only: gone
 * when the tab closes, never in localStorage or a cookie.
 */
import { createNexusClient, NexusConnectionError, NexusError } from '../../generated/client/nexus.js';
import type { Client } from '../../generated/client/client/index.js';

export type { Client };

export * from '../../generated/client/nexus.js';

const KEY = 'nexus.console.managementKey';

/** Where the Admin API is: this page's origin, with the path prefix a proxy may put before /console. */
function apiBase(): string {
  const path = window.location.pathname;
  const at = path.indexOf('/console');
  return window.location.origin + (at > 0 ? path.slice(0, at) : '');
}

export function storedKey(): string | undefined {
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function storeKey(key: string | undefined): void {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** A client with the operator's key; `onUnauthorized` is called when the API answers 401 (the key no longer works). */
export function clientFor(apiKey: string, onUnauthorized?: () => void): Client {
  const client = createNexusClient({ baseUrl: apiBase(), apiKey });
  if (onUnauthorized)
    client.interceptors.response.use((response) => {
      if (response.status === 401) onUnauthorized();
      return response;
    });
  return client;
}

/** What an error says to the operator: the API's message and the request id to quote. */
export interface Problem {
  message: string;
  requestId?: string | undefined;
  status?: number | undefined;
}

export function problemOf(err: unknown): Problem {
  if (err instanceof NexusConnectionError) return { message: `Nexus could not be reached (${err.message})` };
  if (err instanceof NexusError) {
    const body = err.body as { error?: { message?: string } } | undefined;
    return { message: body?.error?.message ?? err.message, requestId: err.requestId, status: err.status };
  }
  return { message: err instanceof Error ? err.message : String(err) };
}

/** The headers of one create: a fresh Idempotency-Key, so a retried click replays the first answer rather than creating twice. */
export function idempotent(): { 'Idempotency-Key': string } {
  return { 'Idempotency-Key': crypto.randomUUID() };
}
