/**
 * Sign-in with OpenID Connect (docs/people.md): the authorization code flow with PKCE, by `openid-client`, against
 * each provider of the configuration. The browser carries a short-lived random token in its own cookie; the
 * attempt's state, nonce and PKCE verifier stay here, found by that token's hash and used once, so that a callback
 * is only taken from the browser that began it. The ID token is checked by openid-client (signature by the
 * provider's keys, issuer, audience, expiry, nonce); the person is its issuer and subject.
 */
import type * as oidc from 'openid-client';
import type { OidcProviderConfig, RoleMapping } from '../../config-people.js';
import { AppError } from '../../errors.js';
import type { Logger } from '../../observability/logger.js';
import type { Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import { generateToken, type KeyHasher } from '../security/key-hash.js';
import type { SecretBox } from '../security/secret-box.js';
import type { PersonClaims } from './session-service.js';
import type { SignInRepo } from './sign-in-repo.js';

/** How long a sign-in may take at the provider. */
const ATTEMPT_MS = 10 * 60_000;
/** A provider's discovery document is fetched again after this long (its keys may have rotated: openid-client refetches those itself). */
const DISCOVERY_MS = 3600_000;

let library: Promise<typeof oidc> | undefined;
/** openid-client, loaded at the first sign-in or sign-out through a provider: a process without one never holds it. */
function openidClient(): Promise<typeof oidc> {
  return (library ??= import('openid-client'));
}

interface OidcDeps {
  providers: readonly OidcProviderConfig[];
  signInRepo: SignInRepo;
  hasher: KeyHasher;
  secretBox: SecretBox;
  clock: Clock;
  logger: Logger;
  fetch: typeof fetch;
  /** Each provider's discovered configuration, made at its first use. */
  discovered: Map<string, { at: number; config: Promise<oidc.Configuration> }>;
}

/** http is allowed for an issuer on this machine only (a development IdP); any other must be https. */
function isLoopback(url: URL): boolean {
  return url.hostname === 'localhost' || url.hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(url.hostname);
}

function providerOf(deps: OidcDeps, id: string): OidcProviderConfig {
  const provider = deps.providers.find((p) => p.id === id);
  if (!provider) throw new AppError('sign_in_failed', `No single sign-on provider '${id}' is configured`);
  return provider;
}

/** The provider's configuration (discovery, client authentication by client_secret_basic), cached. */
function configurationOf(deps: OidcDeps, provider: OidcProviderConfig): Promise<oidc.Configuration> {
  const cached = deps.discovered.get(provider.id);
  if (cached && Date.now() - cached.at < DISCOVERY_MS) return cached.config;
  const issuer = new URL(provider.issuer);
  const insecure = issuer.protocol === 'http:' && isLoopback(issuer);
  const config = openidClient().then((oidc) =>
    oidc.discovery(issuer, provider.clientId, undefined, oidc.ClientSecretBasic(provider.clientSecret), {
      [oidc.customFetch]: deps.fetch as oidc.CustomFetch,
      ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
    }),
  );
  // A failed discovery is tried again at the next sign-in, not kept.
  config.catch(() => deps.discovered.delete(provider.id));
  deps.discovered.set(provider.id, { at: Date.now(), config });
  return config;
}

/** A provider's rules of memberships given at sign-in. */
function roleMappingsOf(deps: OidcDeps, providerId: string): readonly RoleMapping[] {
  return providerOf(deps, providerId).roleMappings;
}

/** The providers, as the sign-in page lists them. */
function list(deps: OidcDeps): { id: string; name: string }[] {
  return deps.providers.map((p) => ({ id: p.id, name: p.name }));
}

/** A sign-in begun: the browser's token (its cookie) and where to send the browser. */
async function begin(deps: OidcDeps, providerId: string, redirectUri: string): Promise<{ browserToken: string; authorizationUrl: string }> {
  const provider = providerOf(deps, providerId);
  const config = await discover(deps, provider);
  const oidc = await openidClient();
  const browserToken = generateToken('');
  const id = deps.hasher.hash(browserToken);
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const sealed = deps.secretBox.seal(verifier, `sign-in:${id}`);
  await deps.signInRepo.insertAttempt({
    id,
    provider: provider.id,
    state,
    nonce,
    code_verifier_ciphertext: sealed.ciphertext,
    code_verifier_key_id: sealed.keyId,
    expires_at: new Date(deps.clock.now().getTime() + ATTEMPT_MS),
  });
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: 'openid email profile',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  return { browserToken, authorizationUrl: url.href };
}

async function discover(deps: OidcDeps, provider: OidcProviderConfig): Promise<oidc.Configuration> {
  try {
    return await configurationOf(deps, provider);
  } catch (err) {
    deps.logger.warn({ msg: 'the single sign-on provider could not be discovered', provider: provider.id, error: (err as Error).message });
    throw new AppError('sign_in_failed', `The provider '${provider.id}' could not be reached: try again later`);
  }
}

/** The email the provider vouches for: verified, or from a provider trusted to send only its users' own. */
function emailOf(provider: OidcProviderConfig, claims: oidc.IDToken): string | null {
  const email = typeof claims.email === 'string' ? claims.email.toLowerCase() : null;
  if (!email) return null;
  return claims.email_verified === true || provider.trustEmail ? email : null;
}

/**
 * The callback: the attempt of the browser's token taken (once), the code exchanged with its PKCE verifier, the
 * ID token checked; whom it names, and the ID token itself (for the provider's sign-out).
 */
async function finish(
  deps: OidcDeps,
  providerId: string,
  input: { browserToken: string | undefined; callbackUrl: URL; redirectUri: string },
): Promise<{ person: PersonClaims; idToken: string | undefined; groups: string[] }> {
  const provider = providerOf(deps, providerId);
  if (!input.browserToken) throw new AppError('sign_in_failed', 'This browser began no sign-in (or its cookie expired): sign in again');
  const id = deps.hasher.hash(input.browserToken);
  const attempt = await deps.signInRepo.takeAttempt(id, deps.clock.now());
  if (!attempt || attempt.provider !== provider.id) {
    throw new AppError('sign_in_failed', 'This sign-in expired or was already used: sign in again');
  }
  const config = await discover(deps, provider);
  const oidc = await openidClient();
  const verifier = deps.secretBox.open(
    { ciphertext: attempt.code_verifier_ciphertext, keyId: attempt.code_verifier_key_id },
    `sign-in:${id}`,
  );
  // The redirect URI sent at the token endpoint is the registered one, whatever host the callback came by.
  const current = new URL(input.redirectUri);
  current.search = input.callbackUrl.search;
  let claims;
  let idToken;
  try {
    const tokens = await oidc.authorizationCodeGrant(config, current, {
      pkceCodeVerifier: verifier,
      expectedState: attempt.state,
      expectedNonce: attempt.nonce,
      idTokenExpected: true,
    });
    claims = await claimsOf(config, tokens);
    idToken = tokens.id_token;
  } catch (err) {
    const e = err as { error?: string; code?: string; message?: string };
    deps.logger.warn({ msg: 'a single sign-on callback was refused', provider: provider.id, reason: e.error ?? e.code ?? e.message });
    throw new AppError('sign_in_failed', `The provider did not sign you in (${e.error ?? e.code ?? 'refused'})`);
  }
  const name = typeof claims.name === 'string' ? claims.name : null;
  const listed = claims[provider.groupsClaim];
  const groups = Array.isArray(listed) ? listed.filter((g): g is string => typeof g === 'string') : [];
  return { person: { issuer: claims.iss, subject: claims.sub, email: emailOf(provider, claims), name }, idToken, groups };
}

/**
 * The ID token's claims, with the UserInfo endpoint's added when the ID token carries no email (a provider may keep
 * the scopes' claims for UserInfo alone, as OpenID Connect Core 5.4 allows when an access token is issued). The ID
 * token's own claims (its issuer and subject above all) are never replaced.
 */
async function claimsOf(config: oidc.Configuration, tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers) {
  const claims = tokens.claims()!;
  if (claims.email !== undefined || !config.serverMetadata().userinfo_endpoint || !tokens.access_token) return claims;
  const info = await (await openidClient()).fetchUserInfo(config, tokens.access_token, claims.sub);
  return { ...info, ...claims } as oidc.IDToken;
}

/** Where the browser ends its session at the provider, when the provider offers that (end_session_endpoint). */
async function endSessionUrl(
  deps: OidcDeps,
  providerId: string,
  input: { idToken: string | undefined; postLogoutRedirectUri: string },
): Promise<string | undefined> {
  const provider = deps.providers.find((p) => p.id === providerId);
  if (!provider) return undefined;
  let config: oidc.Configuration;
  try {
    config = await configurationOf(deps, provider);
  } catch {
    return undefined;
  }
  if (!config.serverMetadata().end_session_endpoint) return undefined;
  const parameters: Record<string, string> = { post_logout_redirect_uri: input.postLogoutRedirectUri, client_id: provider.clientId };
  if (input.idToken) parameters.id_token_hint = input.idToken;
  return (await openidClient()).buildEndSessionUrl(config, parameters).href;
}

export function createOidcSignIn(deps: Omit<OidcDeps, 'discovered'>) {
  const all: OidcDeps = { ...deps, discovered: new Map() };
  return bindDeps(all, { list, begin, finish, endSessionUrl, roleMappingsOf });
}

export type OidcSignIn = ReturnType<typeof createOidcSignIn>;
