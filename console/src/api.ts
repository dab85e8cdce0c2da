/**
 * The console's one way to Nexus: the generated typed client (@nexus-gateway/client's entry, bundled), made
 * with the person's session (single sign-on or a login link: its cookie goes with each request, its CSRF token
 * in X-CSRF-Token) or with the Management Key the operator signed in with. The key lives in sessionStorage
 * only: gone when the tab closes, never in localStorage or a cookie.
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

/** A client of the person's session: the cookie goes by itself (same origin), the CSRF token with each request. */
export function sessionClient(csrfToken: string, onUnauthorized?: () => void): Client {
  const client = createNexusClient({ baseUrl: apiBase(), defaultHeaders: { 'X-CSRF-Token': csrfToken } });
  if (onUnauthorized)
    client.interceptors.response.use((response) => {
      if (response.status === 401) onUnauthorized();
      return response;
    });
  return client;
}

/** The person signed in (GET /auth/session), or undefined when this browser has no live session. */
export interface Session {
  person: { email: string | null; name: string | null };
  csrfToken: string;
  expiresAt: string;
}

export async function readSession(): Promise<Session | undefined> {
  const res = await fetch(`${apiBase()}/auth/session`, { credentials: 'same-origin' });
  if (res.ok) return (await res.json()) as Session;
  // Read to its end, so the request ends (an answer left unread keeps the page's network busy).
  await res.text();
  return undefined;
}

/** What the sign-in page offers: the providers, the Management Key form (unless turned off), a login link's hint. */
export interface SignInOptions {
  providers: { id: string; name: string }[];
  keySignIn: boolean;
  loginLink: boolean;
}

export async function signInOptions(): Promise<SignInOptions> {
  const res = await fetch(`${apiBase()}/auth/providers`);
  if (res.ok) return (await res.json()) as SignInOptions;
  await res.text();
  return { providers: [], keySignIn: true, loginLink: false };
}

/** Where a provider's sign-in begins. */
export const providerSignInUrl = (id: string) => `${apiBase()}/auth/sso/${encodeURIComponent(id)}`;

/** Ends the session here; where to end it at its provider, if the provider offers that. */
export async function endSession(csrfToken: string): Promise<string | undefined> {
  const res = await fetch(`${apiBase()}/auth/sign-out`, { method: 'POST', headers: { 'X-CSRF-Token': csrfToken } });
  if (!res.ok) return undefined;
  return ((await res.json()) as { providerSignOutUrl?: string }).providerSignOutUrl;
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
