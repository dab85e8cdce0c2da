/**
 * The Nexus operator console: sign in (single sign-on, a login link, or a Management Key), pick a workspace, and manage it
 * page by page. Every call goes through the generated client (api.ts); the routes are in the
 * location's hash (#/w/<workspaceId>/<page>; a call's own link: #/invocations/<id>), so a page can be
 * reloaded and linked to.
 */
import { render } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import {
  clientFor,
  endSession,
  getCaller,
  getInvocation,
  getWorkspace,
  listWorkspaces,
  providerSignInUrl,
  readSession,
  sessionClient,
  signInOptions,
  storedKey,
  storeKey,
  type CallerDto,
  type Client,
  type Session,
  type SignInOptions,
  type WorkspaceDto,
} from './api.js';
import { useAction, useRead, valueOf } from './hooks.js';
import { Allowed, ErrorNote, Field, Working, WORKSPACES_CHANGED, type PageProps } from './ui.js';
import { WorkspacesPage } from './pages/workspaces.js';
import { ConnectionsPage } from './pages/connections.js';
import { PlansPage } from './pages/plans.js';
import { UsersPage } from './pages/users.js';
import { KeysPage } from './pages/keys.js';
import { InvocationsPage } from './pages/invocations.js';
import { UsagePage } from './pages/usage.js';
import { BillingPage } from './pages/billing.js';
import { AuditPage } from './pages/audit.js';
import { RoutesPage } from './pages/routes.js';
import { PricesPage } from './pages/prices.js';
import { BudgetPage } from './pages/budget.js';
import { WebhooksPage } from './pages/webhooks.js';
import { SettingsPage } from './pages/settings.js';
import { ManagementKeysPage } from './pages/management-keys.js';

const PAGES: { path: string; title: string; component: (props: PageProps) => preact.JSX.Element }[] = [
  { path: 'connections', title: 'Provider connections', component: ConnectionsPage },
  { path: 'routes', title: 'Routes', component: RoutesPage },
  { path: 'plans', title: 'Plans and strategies', component: PlansPage },
  { path: 'users', title: 'Users and accesses', component: UsersPage },
  { path: 'keys', title: 'Inference keys', component: KeysPage },
  { path: 'invocations', title: 'Invocations', component: InvocationsPage },
  { path: 'usage', title: 'Usage over time', component: UsagePage },
  { path: 'prices', title: 'Prices', component: PricesPage },
  { path: 'budget', title: 'Budget', component: BudgetPage },
  { path: 'billing', title: 'Billing', component: BillingPage },
  { path: 'webhooks', title: 'Webhooks', component: WebhooksPage },
  { path: 'audit', title: 'Audit log', component: AuditPage },
  { path: 'settings', title: 'Workspace settings', component: SettingsPage },
];

/** The route in the URL's hash, and what follows it after `?` (a page's own state, `…/invocations?status=FAILED`). */
function useRoute(): { route: string[]; query: string; setQuery: (query: string) => void } {
  const read = () => {
    const [path = '', query = ''] = window.location.hash.replace(/^#\/?/, '').split('?');
    return { route: path.split('/').filter(Boolean), query };
  };
  const [state, setState] = useState(read);
  useEffect(() => {
    const onChange = () =>
      setState((shown) => {
        const now = read();
        return now.query === shown.query && now.route.join('/') === shown.route.join('/') ? shown : now;
      });
    window.addEventListener('hashchange', onChange);
    // Effects run after paint: a hash that changed between the first render and now had no listener to tell.
    onChange();
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  const setQuery = (query: string) => {
    const url = window.location.hash.split('?')[0] + (query ? `?${query}` : '');
    if (url === window.location.hash) return;
    history.replaceState(history.state, '', url);
    setState(read());
  };
  return { ...state, setQuery };
}

type Theme = 'system' | 'light' | 'dark';
const THEME_KEY = 'nexus.console.theme';

/** The colour scheme: the system's unless the operator chose one (kept in localStorage; it is no secret). */
function applyTheme(theme: Theme): void {
  if (theme === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
}

function storedTheme(): Theme {
  const t = localStorage.getItem(THEME_KEY);
  return t === 'light' || t === 'dark' ? t : 'system';
}

function ThemeToggle() {
  const [theme, setTheme] = useState(storedTheme);
  const nextOf: Record<Theme, Theme> = { system: 'dark', dark: 'light', light: 'system' };
  const choose = () => {
    const next = nextOf[theme];
    if (next === 'system') localStorage.removeItem(THEME_KEY);
    else localStorage.setItem(THEME_KEY, next);
    applyTheme(next);
    setTheme(next);
  };
  return (
    <button type="button" class="theme" onClick={choose} title="Colour scheme: system, dark or light">
      Theme: {theme}
    </button>
  );
}

/** The skip link: to the page's content (#main), without touching the route in the hash. */
function SkipLink() {
  return (
    <a
      class="skip"
      href="#main"
      onClick={(e) => {
        e.preventDefault();
        document.getElementById('main')?.focus();
      }}
    >
      Skip to content
    </a>
  );
}

function KeySignIn({ onSignedIn }: { onSignedIn: (key: string) => void }) {
  const [key, setKey] = useState('');
  const action = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    // The key is checked by one call before it is kept.
    const ok = await action.run('Checking the key…', () => listWorkspaces({ client: clientFor(key.trim()), query: { limit: 1 } }));
    if (ok) onSignedIn(key.trim());
  };
  return (
    <form class="card form" onSubmit={(e) => void submit(e)} aria-label="Sign in with a key">
      <h2>Management Key</h2>
      <Field
        label="Management Key"
        hint="nx-mgmt-…: the root key, or a key scoped to some workspaces. Kept in this tab only (sessionStorage)."
      >
        <input
          type="password"
          name="managementKey"
          autoComplete="off"
          required
          minLength={24}
          value={key}
          onInput={(e) => setKey(valueOf(e))}
        />
      </Field>
      <button type="submit" disabled={!!action.working}>
        Sign in with the key
      </button>
      <ErrorNote problem={action.problem} />
    </form>
  );
}

function SignIn({
  options,
  onSignedIn,
  notice,
}: {
  options: SignInOptions;
  onSignedIn: (key: string) => void;
  notice?: string | undefined;
}) {
  return (
    <main class="signin" id="main" tabIndex={-1}>
      <h1>Nexus console</h1>
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      <section class="card form" aria-label="Sign in">
        <h2>Sign in</h2>
        {options.providers.map((p) => (
          <a key={p.id} class="button primary" href={providerSignInUrl(p.id)}>
            Sign in with {p.name}
          </a>
        ))}
        {options.loginLink ? (
          <p class="hint">
            No single sign-on is configured: run <code>nexus login-link</code> on the server for a one-time sign-in link.
          </p>
        ) : null}
      </section>
      {options.keySignIn ? <KeySignIn onSignedIn={onSignedIn} /> : null}
      <p>
        <a href="../docs">API reference</a> · <ThemeToggle />
      </p>
    </main>
  );
}

function WorkspacePicker({ client, current }: { client: Client; current: string | undefined }) {
  const [workspaces, setWorkspaces] = useState<WorkspaceDto[]>([]);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    // The workspaces page says when it created, renamed or archived one.
    const changed = () => setVersion((v) => v + 1);
    window.addEventListener(WORKSPACES_CHANGED, changed);
    return () => window.removeEventListener(WORKSPACES_CHANGED, changed);
  }, []);
  useEffect(() => {
    listWorkspaces({ client, query: { limit: 100, status: 'ACTIVE' } })
      .then((page) => setWorkspaces(page.data))
      .catch(() => setWorkspaces([]));
  }, [client, current, version]);
  return (
    <label class="picker">
      <span class="label">Workspace</span>
      <select
        value={current ?? ''}
        onChange={(e) => {
          const id = valueOf(e);
          window.location.hash = id ? `#/w/${id}/connections` : '#/workspaces';
        }}
      >
        <option value="">Choose a workspace…</option>
        {workspaces.map((w) => (
          <option key={w.id} value={w.id}>
            {w.name}
          </option>
        ))}
      </select>
    </label>
  );
}

/**
 * #/invocations/<id>: a call's own link, whatever the workspace. The invocation names its workspace; the
 * route becomes the detail on that workspace's invocations page (replaced, so Back does not return here).
 */
function InvocationLink({ client, invocationId }: { client: Client; invocationId: string }) {
  const action = useAction();
  useRead(
    async () => (await getInvocation({ client, path: { invocationId } })).data,
    (found) => window.location.replace(`#/w/${found.workspaceId}/invocations/${found.id}`),
    [invocationId],
    { action, label: 'Opening the invocation…' },
  );
  return (
    <>
      <h1>Invocation</h1>
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
    </>
  );
}

/**
 * What the caller may call where the page is (getCaller's operations, by the role table): an owner everything; anyone
 * else, in a workspace, its role's operations there, and elsewhere what any of their workspaces allows. Nothing
 * while it is read (no form flashes that the role may not use); everything if it cannot be read (the server decides).
 */
function useAllowedHere(client: Client, workspaceId: string | undefined): (operationId: string) => boolean {
  const [caller, setCaller] = useState<CallerDto | 'unknown' | undefined>();
  useEffect(() => {
    void getCaller({ client })
      .then((res) => setCaller(res.data ?? 'unknown'))
      .catch(() => setCaller('unknown'));
  }, [client]);
  return useMemo(() => {
    if (caller === undefined) return () => false;
    if (caller === 'unknown' || caller.owner) return () => true;
    const here = workspaceId ? caller.workspaces.filter((w) => w.workspaceId === workspaceId) : caller.workspaces;
    const operations = new Set(here.flatMap((w) => w.operations));
    return (operationId) => operations.has(operationId);
  }, [caller, workspaceId]);
}

function Shell({ client, onSignOut }: { client: Client; onSignOut: () => void }) {
  const { route, query, setQuery } = useRoute();
  const workspaceId = route[0] === 'w' ? route[1] : undefined;
  const pageName = route[0] === 'w' ? (route[2] ?? 'connections') : route[0] === 'management-keys' ? 'management-keys' : 'workspaces';
  const [workspace, setWorkspace] = useState<WorkspaceDto | undefined>();
  const allowed = useAllowedHere(client, workspaceId);
  const action = useAction();
  useEffect(() => setWorkspace(undefined), [workspaceId]);
  useRead(workspaceId ? async () => (await getWorkspace({ client, path: { workspaceId } })).data : undefined, setWorkspace, [workspaceId], {
    action,
    label: 'Opening the workspace…',
  });
  const page = PAGES.find((p) => p.path === pageName);
  const Page = page?.component;
  useEffect(() => {
    const title = pageName === 'management-keys' ? 'Management keys' : (page?.title ?? 'Workspaces');
    document.title = `${title}${workspace ? ` · ${workspace.name}` : ''} · Nexus console`;
  }, [page, pageName, workspace]);
  return (
    <div class="shell">
      <SkipLink />
      <header>
        <a class="brand" href="#/workspaces">
          Nexus console
        </a>
        <WorkspacePicker client={client} current={workspaceId} />
        <a class="docs" href="../docs">
          API reference
        </a>
        <ThemeToggle />
        <button type="button" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <nav class="sidebar" aria-label="Pages">
        <a href="#/workspaces" aria-current={pageName === 'workspaces' ? 'page' : undefined}>
          Workspaces
        </a>
        {allowed('listManagementKeys') ? (
          <a href="#/management-keys" aria-current={pageName === 'management-keys' ? 'page' : undefined}>
            Management keys
          </a>
        ) : null}
        {PAGES.map((p) =>
          workspaceId ? (
            <a key={p.path} href={`#/w/${workspaceId}/${p.path}`} aria-current={pageName === p.path ? 'page' : undefined}>
              {p.title}
            </a>
          ) : (
            <span key={p.path} class="disabled" title="Choose a workspace first">
              {p.title}
            </span>
          ),
        )}
      </nav>
      <main id="main" tabIndex={-1}>
        <Allowed.Provider value={allowed}>
          {route[0] === 'invocations' && route[1] ? (
            <InvocationLink client={client} invocationId={route[1]} />
          ) : pageName === 'workspaces' ? (
            <WorkspacesPage client={client} />
          ) : pageName === 'management-keys' ? (
            <ManagementKeysPage client={client} />
          ) : !Page ? (
            <p>No such page. Pick one in the navigation.</p>
          ) : workspace ? (
            <Page client={client} workspace={workspace} rest={route.slice(3)} query={query} setQuery={setQuery} />
          ) : (
            <ErrorNote problem={action.problem} />
          )}
        </Allowed.Provider>
      </main>
    </div>
  );
}

/** How this tab is signed in: a person's session, a Management Key, or not (yet: `undefined` while it is asked). */
type SignedIn = { kind: 'session'; session: Session } | { kind: 'key'; key: string } | { kind: 'none'; options: SignInOptions };

function App() {
  const [signedIn, setSignedIn] = useState<SignedIn | undefined>(() => {
    const key = storedKey();
    return key ? { kind: 'key', key } : undefined;
  });
  const [notice, setNotice] = useState<string | undefined>();
  const signInPage = useRef(async (why?: string) => {
    setNotice(why);
    setSignedIn({ kind: 'none', options: await signInOptions() });
  });
  useEffect(() => {
    if (signedIn) return;
    void readSession().then((session) => (session ? setSignedIn({ kind: 'session', session }) : signInPage.current()));
  }, [signedIn]);
  // A 401 mid-session (the key revoked, the session ended): back to sign-in, saying why.
  const expired = useRef((what: string) => {
    storeKey(undefined);
    void signInPage.current(`${what} (401): sign in again.`);
  });
  const client = useMemo(() => {
    if (signedIn?.kind === 'key') return clientFor(signedIn.key, () => expired.current('Your Management Key was refused'));
    if (signedIn?.kind === 'session') return sessionClient(signedIn.session.csrfToken, () => expired.current('Your session has ended'));
    return undefined;
  }, [signedIn]);
  if (!signedIn) return <Working label="Signing in…" />;
  if (signedIn.kind === 'none' || !client) {
    return (
      <SignIn
        options={signedIn.kind === 'none' ? signedIn.options : { providers: [], keySignIn: true, loginLink: false }}
        notice={notice}
        onSignedIn={(k) => {
          storeKey(k);
          setNotice(undefined);
          setSignedIn({ kind: 'key', key: k });
        }}
      />
    );
  }
  const signOut = async () => {
    storeKey(undefined);
    window.location.hash = '';
    if (signedIn.kind === 'session') {
      // Ended here; then at the provider too, where it offers that (it sends the browser back to the console).
      const providerUrl = await endSession(signedIn.session.csrfToken);
      if (providerUrl) return window.location.assign(providerUrl);
    }
    await signInPage.current();
  };
  return <Shell client={client} onSignOut={() => void signOut()} />;
}

applyTheme(storedTheme());
const root = document.getElementById('app')!;
root.textContent = '';
render(<App />, root);
