/**
 * People's sign-in, outside the Admin API's contract (browsers follow these, docs/people.md):
 *
 *   GET  /auth/providers               what the console's sign-in page offers (providers, key sign-in, login link)
 *   GET  /auth/sso/{id}                begins the provider's sign-in: a 302 to its authorization endpoint
 *   GET  /auth/sso/{id}/callback       the provider's redirect back: the session cookie set, a 303 to the console
 *   GET  /auth/session                 the session's person, end and CSRF token (401 without one)
 *   POST /auth/sign-out                ends the session (CSRF token needed); where to go to end it at the provider
 *   GET  /auth/link?token=...          a login link's page: one button, so that a link fetched by a preview is not used
 *   POST /auth/link                    uses the link: the session cookie set, a 303 to the console
 *   GET  /auth/invitation?token=...    an invitation's page: kept in this browser (a cookie), then a sign-in accepts it
 *
 * Nothing here writes a token, a cookie or a code to the log; answers are never cached.
 */
import express, { type Express, type Request, type Response } from 'express';
import type { Config } from '../config.js';
import type { People } from '../domain/people/people.js';
import type { StartedSession } from '../domain/people/session-service.js';
import { AppError, toAppError } from '../errors.js';
import type { RequestLocals } from '../web/locals.js';
import { sendError } from './api.js';
import type { PublicUrl } from './public-url.js';
import { clearCookie, cookieHeader, cookieOf, sessionCookieName, signInCookieName } from './session-auth.js';

interface SignInDeps {
  config: Config;
  people: People;
  publicUrl: PublicUrl;
}

const SIGN_IN_COOKIE_SECONDS = 600;
const PAGE_POLICY = "default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const html = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A small page of the sign-in (a refusal, the login link's button): no script, nothing from elsewhere. */
function page(res: Response, status: number, title: string, body: string): void {
  res.status(status).set({ 'Content-Security-Policy': PAGE_POLICY, 'Referrer-Policy': 'no-referrer' });
  res.type('html').send(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>${html(title)}</title><meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body>
<main>
<h1>${html(title)}</h1>
${body}
</main>
</body>
</html>`);
}

/** A sign-in that failed, said on a page with the way back to the console. */
function refusal(deps: SignInDeps, req: Request, res: Response, err: unknown): void {
  const e = toAppError(err);
  if (e.status >= 500) (res.locals as RequestLocals).error = err;
  (res.locals as RequestLocals).errorCode = e.code;
  page(
    res,
    e.status,
    'Sign-in failed',
    `<p>${html(e.message)}</p>\n<p><a href="${html(consoleUrl(deps, req))}">Back to the console</a></p>`,
  );
}

function setSession(res: Response, config: Config, session: StartedSession): void {
  const seconds = (session.expiresAt.getTime() - Date.now()) / 1000;
  res.append('Set-Cookie', cookieHeader(config, sessionCookieName(config), session.token, seconds));
}

/** The console, by the public URL (a proxy's path prefix included). */
const consoleUrl = (deps: SignInDeps, req: Request) => `${deps.publicUrl.forRequest(req)}/console/`;
const redirectUriOf = (deps: SignInDeps, req: Request, id: string) => `${deps.publicUrl.forRequest(req)}/auth/sso/${id}/callback`;

function providerRoutes(router: express.Router, deps: SignInDeps): void {
  const { config, people } = deps;
  router.get('/sso/:provider', async (req: Request, res: Response) => {
    try {
      const id = String(req.params.provider);
      const { browserToken, authorizationUrl } = await people.oidc.begin(id, redirectUriOf(deps, req, id));
      res.append('Set-Cookie', cookieHeader(config, signInCookieName(config), browserToken, SIGN_IN_COOKIE_SECONDS));
      res.redirect(302, authorizationUrl);
    } catch (err) {
      refusal(deps, req, res, err);
    }
  });
  router.get('/sso/:provider/callback', async (req: Request, res: Response) => {
    clearCookie(res, config, signInCookieName(config));
    const invitationToken = cookieOf(req, invitationCookieName(config));
    if (invitationToken) clearCookie(res, config, invitationCookieName(config));
    try {
      const id = String(req.params.provider);
      const callbackUrl = new URL(req.originalUrl, 'http://callback.invalid');
      const session = await people.signIn.signInWithProvider(id, {
        invitationToken,
        browserToken: cookieOf(req, signInCookieName(config)),
        callbackUrl,
        redirectUri: redirectUriOf(deps, req, id),
      });
      setSession(res, config, session);
      res.redirect(303, consoleUrl(deps, req));
    } catch (err) {
      refusal(deps, req, res, err);
    }
  });
}

function sessionRoutes(router: express.Router, deps: SignInDeps): void {
  const { config, people } = deps;
  const cookie = sessionCookieName(config);
  router.get('/session', async (req: Request, res: Response) => {
    const token = cookieOf(req, cookie);
    try {
      if (!token) throw new AppError('missing_credentials', 'Not signed in');
      const session = await people.sessions.authenticate(token);
      res.json(people.sessions.describe(token, session));
    } catch (err) {
      if (token) clearCookie(res, config, cookie);
      sendError(req, res, err);
    }
  });
  router.post('/sign-out', async (req: Request, res: Response) => {
    const token = cookieOf(req, cookie);
    try {
      if (!token) throw new AppError('missing_credentials', 'Not signed in');
      const sent = req.headers['x-csrf-token'];
      people.sessions.checkCsrf(token, typeof sent === 'string' ? sent : undefined);
      const ended = await people.sessions.end(token);
      clearCookie(res, config, cookie);
      const providerUrl = ended?.provider
        ? await people.oidc.endSessionUrl(ended.provider, { idToken: ended.idToken, postLogoutRedirectUri: consoleUrl(deps, req) })
        : undefined;
      res.json({ signedOut: Boolean(ended), ...(providerUrl ? { providerSignOutUrl: providerUrl } : {}) });
    } catch (err) {
      sendError(req, res, err);
    }
  });
}

function linkRoutes(router: express.Router, deps: SignInDeps): void {
  const { config, people } = deps;
  router.get('/link', (req: Request, res: Response) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    page(
      res,
      200,
      'Sign in to Nexus',
      `<p>This link signs you in as the owner of this Nexus, once.</p>
<form method="post" action="link"><input type="hidden" name="token" value="${html(token)}"><button type="submit">Sign in</button></form>`,
    );
  });
  router.post('/link', express.urlencoded({ extended: false, limit: 4096 }), async (req: Request, res: Response) => {
    try {
      const token = typeof req.body?.token === 'string' ? (req.body.token as string) : '';
      const session = await people.signIn.redeemLoginLink(token);
      setSession(res, config, session);
      res.redirect(303, consoleUrl(deps, req));
    } catch (err) {
      refusal(deps, req, res, err);
    }
  });
}

/** The invitation's cookie: kept through the provider's sign-in, read (and cleared) at its callback. */
const invitationCookieName = (config: Config) => (config.sessionCookieSecure ? '__Host-nexus_invitation' : 'nexus_invitation');

function invitationRoutes(router: express.Router, deps: SignInDeps): void {
  const { config, people } = deps;
  router.get('/invitation', (req: Request, res: Response) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    if (token) res.append('Set-Cookie', cookieHeader(config, invitationCookieName(config), encodeURIComponent(token), 3600));
    const providers = people.oidc.list();
    const buttons = providers
      .map((p) => `<p><a href="${html(`sso/${encodeURIComponent(p.id)}`)}">Sign in with ${html(p.name)}</a></p>`)
      .join('\n');
    page(
      res,
      200,
      'You are invited to Nexus',
      `<p>Sign in with the email this invitation was sent to: the sign-in accepts it.</p>\n${buttons || '<p>No single sign-on is configured here: ask the owner.</p>'}`,
    );
  });
}

export function serveSignIn(app: Express, deps: SignInDeps): void {
  const router = express.Router();
  router.use((_req: Request, res: Response, next: () => void) => {
    res.set({ 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' });
    next();
  });
  router.get('/providers', (_req: Request, res: Response) => {
    const providers = deps.people.oidc.list();
    res.json({ providers, keySignIn: deps.config.consoleKeySignIn, loginLink: providers.length === 0 });
  });
  providerRoutes(router, deps);
  sessionRoutes(router, deps);
  linkRoutes(router, deps);
  invitationRoutes(router, deps);
  app.use('/auth', router);
}
