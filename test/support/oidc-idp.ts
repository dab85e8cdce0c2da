/**
 * A company's identity provider on 127.0.0.1: `oidc-provider`, a certified OpenID Provider, with one client (Nexus)
 * and a directory of people. Its login page is the library's own development page (any password); consent is
 * granted by the company for its own app, as Okta or Entra ID do for an app an administrator assigned. PKCE is
 * required. Nothing of the protocol is mocked: Nexus discovers it, is redirected to it, trades a code at its token
 * endpoint and checks its signed ID token.
 *
 * `listen()` comes first (Nexus needs the issuer's URL), `configure()` once Nexus listens (the client's redirect URI
 * names Nexus's port).
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type KoaContextWithOIDC } from 'oidc-provider';

interface IdpPerson {
  email: string;
  name: string;
  emailVerified?: boolean;
  /** The groups the directory puts them in (the `groups` claim, released with the profile scope). */
  groups?: string[];
}

export interface Idp {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** People by login (their subject at the IdP). */
  people: Map<string, IdpPerson>;
  configure(nexusUrl: string, providerId: string): void;
  /** End-session requests the IdP received (their query). */
  endSessions: URLSearchParams[];
  close(): Promise<void>;
}

export async function startIdp(): Promise<Idp> {
  let handle: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const endSessions: URLSearchParams[] = [];
  const server: Server = createServer((req, res) => {
    if (req.url?.startsWith('/session/end') && req.method === 'GET') {
      endSessions.push(new URL(req.url, 'http://idp.invalid').searchParams);
    }
    if (!handle) {
      res.writeHead(503).end();
      return;
    }
    handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const people = new Map<string, IdpPerson>();
  const clientId = 'nexus-console';
  const clientSecret = 'idp-client-secret-0123456789abcdef';
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'idp-key', use: 'sig', alg: 'RS256' };

  return {
    issuer,
    clientId,
    clientSecret,
    people,
    endSessions,
    configure(nexusUrl: string, providerId: string) {
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: [`${nexusUrl}/auth/sso/${providerId}/callback`],
            post_logout_redirect_uris: [`${nexusUrl}/console/`],
            response_types: ['code'],
            grant_types: ['authorization_code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        jwks: { keys: [jwk] },
        cookies: { keys: ['idp-cookie-key-0123456789'] },
        pkce: { required: () => true },
        claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'groups'] },
        features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
        async findAccount(_ctx: KoaContextWithOIDC, sub: string) {
          const person = people.get(sub);
          if (!person) return undefined;
          return {
            accountId: sub,
            claims: async () => ({
              sub,
              email: person.email,
              email_verified: person.emailVerified ?? true,
              name: person.name,
              ...(person.groups ? { groups: person.groups } : {}),
            }),
          };
        },
        // The company's own app: its people are not asked to consent.
        async loadExistingGrant(ctx: KoaContextWithOIDC) {
          const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId! });
          grant.addOIDCScope('openid email profile');
          await grant.save();
          return grant;
        },
      });
      const callback = provider.callback();
      handle = (req, res) => void callback(req, res);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
