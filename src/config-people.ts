/**
 * The variables of people's sign-in (docs/people.md), part of the one schema of src/config.ts: the OpenID
 * Connect providers, who is an owner, the sessions' lifetimes and cookie, and whether the console still offers
 * the Management Key sign-in.
 */
import { z } from 'zod';

/** A provider's id: in its redirect URI (/auth/sso/<id>/callback) and on the sign-in page's link. */
const providerId = z.string().regex(/^[a-z0-9][a-z0-9-]{0,31}$/, { error: 'must be 1 to 32 lowercase letters, digits or dashes' });

const issuerUrl = z.string().regex(/^https?:\/\/[^\s]+$/, { error: 'must be the issuer URL (https://...)' });

const uuid = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, { error: 'must be a workspace id (UUID)' });

/**
 * A rule that makes a person a member when they sign in: by a group the provider names in its groups claim, or by
 * their verified email's domain; as an owner, or with a role in one workspace.
 */
const roleMapping = z
  .object({
    group: z.string().min(1).optional(),
    emailDomain: z.string().min(1).optional(),
    role: z.enum(['owner', 'admin', 'developer', 'billing', 'support', 'viewer']),
    workspaceId: uuid.optional(),
  })
  .superRefine((m, ctx) => {
    if ((m.group === undefined) === (m.emailDomain === undefined)) {
      ctx.addIssue({ code: 'custom', message: 'a role mapping names either a group or an emailDomain' });
    }
    if ((m.role === 'owner') !== (m.workspaceId === undefined)) {
      ctx.addIssue({ code: 'custom', message: 'a role mapping names a workspaceId for a workspace role, and none for owner' });
    }
  });

export type RoleMapping = Readonly<z.output<typeof roleMapping>>;

const provider = z.object({
  id: providerId,
  /** What the sign-in page's button says. */
  name: z.string().min(1).max(80),
  issuer: issuerUrl,
  clientId: z.string().min(1),
  clientSecret: z.string().min(1),
  /**
   * Whether the provider's `email` claim is taken without `email_verified: true` (Entra ID sends no such claim;
   * its tenant-specific issuer vouches for its users' addresses). Off by default.
   */
  trustEmail: z.boolean().default(false),
  /** The ID token's (or UserInfo's) claim that lists the person's groups. */
  groupsClaim: z.string().min(1).default('groups'),
  /** Memberships given at sign-in, by group or email domain (docs/people.md, "Provisioning at sign-in"). */
  roleMappings: z.array(roleMapping).default([]),
});

export type OidcProviderConfig = Readonly<z.output<typeof provider>>;

const providersJson = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON array of providers ({"id","name","issuer","clientId","clientSecret"})' });
      return z.NEVER;
    }
  })
  .pipe(z.array(provider).min(1, { error: 'must name at least one provider' }));

const flag = (fallback: boolean) =>
  z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true');

const minutes = (min: number, max: number, fallback: number) =>
  z.coerce
    .number({ error: 'must be integer' })
    .int({ error: 'must be integer' })
    .min(min, { error: `must be >= ${min}` })
    .max(max, { error: `must be <= ${max}` })
    .default(fallback);

/** The variables, whose shape src/config.ts's schema takes in. */
export const peopleVariables = z.object({
  // One provider by its own variables, or several as JSON; both may be set (the ids must differ).
  NEXUS_OIDC_ISSUER: issuerUrl.optional(),
  NEXUS_OIDC_CLIENT_ID: z.string().min(1).optional(),
  NEXUS_OIDC_CLIENT_SECRET: z.string().min(1).optional(),
  NEXUS_OIDC_ID: providerId.default('sso'),
  NEXUS_OIDC_NAME: z.string().min(1).max(80).default('Single sign-on'),
  NEXUS_OIDC_TRUST_EMAIL: flag(false),
  NEXUS_OIDC_PROVIDERS: providersJson.optional(),
  NEXUS_OWNER_EMAILS: z
    .string()
    .transform((v) =>
      Object.freeze(
        v
          .split(',')
          .map((email) => email.trim().toLowerCase())
          .filter(Boolean),
      ),
    )
    .optional(),
  NEXUS_SESSION_IDLE_MINUTES: minutes(1, 24 * 60, 60),
  NEXUS_SESSION_MAX_HOURS: minutes(1, 24 * 30, 12),
  NEXUS_SESSION_COOKIE_SECURE: flag(true),
  NEXUS_LOGIN_LINK_MINUTES: minutes(1, 24 * 60, 15),
  NEXUS_INVITATION_DAYS: minutes(1, 90, 7),
  NEXUS_CONSOLE_KEY_SIGN_IN: flag(true),
});

type PeopleVariables = z.output<typeof peopleVariables>;

export class PeopleConfigError extends Error {}

/** The providers configured: the one of NEXUS_OIDC_* first, then NEXUS_OIDC_PROVIDERS' in their order. */
function providersOf(v: PeopleVariables): readonly OidcProviderConfig[] {
  const providers: OidcProviderConfig[] = [];
  const single = [v.NEXUS_OIDC_ISSUER, v.NEXUS_OIDC_CLIENT_ID, v.NEXUS_OIDC_CLIENT_SECRET];
  if (single.some(Boolean)) {
    if (!single.every(Boolean)) {
      throw new PeopleConfigError(
        'NEXUS_OIDC_ISSUER, NEXUS_OIDC_CLIENT_ID and NEXUS_OIDC_CLIENT_SECRET go together: set all three, or none',
      );
    }
    providers.push({
      id: v.NEXUS_OIDC_ID,
      name: v.NEXUS_OIDC_NAME,
      issuer: v.NEXUS_OIDC_ISSUER!,
      clientId: v.NEXUS_OIDC_CLIENT_ID!,
      clientSecret: v.NEXUS_OIDC_CLIENT_SECRET!,
      trustEmail: v.NEXUS_OIDC_TRUST_EMAIL,
      groupsClaim: 'groups',
      roleMappings: [],
    });
  }
  for (const p of v.NEXUS_OIDC_PROVIDERS ?? []) {
    if (providers.some((q) => q.id === p.id)) throw new PeopleConfigError(`Two OpenID Connect providers have the id '${p.id}'`);
    providers.push(Object.freeze({ ...p }));
  }
  return Object.freeze(providers);
}

/** What the variables become in the Config. */
export function peopleFields(v: PeopleVariables) {
  return {
    /** OpenID Connect providers people sign in with (none: only `nexus login-link` signs a person in). */
    oidcProviders: providersOf(v),
    /** Verified email addresses (lower case) whose person is an owner of the installation when they sign in. */
    ownerEmails: v.NEXUS_OWNER_EMAILS ?? Object.freeze<string[]>([]),
    /** A session unused this long ends. */
    sessionIdleMs: v.NEXUS_SESSION_IDLE_MINUTES * 60_000,
    /** A session ends this long after sign-in, used or not. */
    sessionMaxMs: v.NEXUS_SESSION_MAX_HOURS * 3600_000,
    /**
     * The session cookie is `__Host-nexus_session` (Secure: browsers keep it from https pages, and from http on
     * localhost). false: `nexus_session` without Secure, for a development install reached over plain http by
     * another name than localhost.
     */
    sessionCookieSecure: v.NEXUS_SESSION_COOKIE_SECURE,
    /** How long a link printed by `nexus login-link` can be used (once). */
    loginLinkMs: v.NEXUS_LOGIN_LINK_MINUTES * 60_000,
    /** How long an invitation's link can be accepted. */
    invitationMs: v.NEXUS_INVITATION_DAYS * 24 * 3600_000,
    /** Whether the console offers the Management Key sign-in beside single sign-on. */
    consoleKeySignIn: v.NEXUS_CONSOLE_KEY_SIGN_IN,
  };
}
