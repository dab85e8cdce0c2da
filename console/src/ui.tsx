/** The console's building blocks: errors, empty states, progress, pages of a list, forms. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import {
  getInferenceKey,
  getWorkspaceAccess,
  listWorkspaceUsers,
  problemOf,
  type ApiKeyDto,
  type Client,
  type Problem,
  type WorkspaceUserDto,
} from './api.js';

export function ErrorNote({ problem }: { problem: Problem | undefined }) {
  if (!problem) return null;
  return (
    <div class="error" role="alert">
      <strong>{problem.message}</strong>
      {problem.requestId ? (
        <span class="request-id">
          {' '}
          Request id: <code>{problem.requestId}</code>
        </span>
      ) : null}
    </div>
  );
}

/** The window event the workspaces page sends when it created, renamed or archived a workspace (the header's picker listens). */
export const WORKSPACES_CHANGED = 'nexus:workspaces-changed';

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

/**
 * A long operation under way: an indeterminate progress bar with what it is doing. With `keepSpace`, its line is kept
 * (empty) when nothing runs: above content that reloads in place (a list after a filter), it then never moves that
 * content while a click on it is in progress. A filter's change fires as its field loses focus, on the mouse-down of
 * the click that follows; a line put in between mouse-down and mouse-up would move the button from under the
 * pointer, and the click would be lost.
 */
export function Working({ label, keepSpace = false }: { label: string | undefined; keepSpace?: boolean }) {
  if (!label && !keepSpace) return null;
  return (
    <div class={keepSpace ? 'working kept' : 'working'} role="status" aria-live="polite">
      {label ? (
        <>
          <progress aria-label={label} /> {label}
        </>
      ) : null}
    </div>
  );
}

/**
 * An action's state: run(fn) shows `label` while it runs, the API's error when it fails, and resolves to fn's
 * result (undefined when it failed). When runs overlap, what shows is the last one's: an earlier run that ends first
 * neither takes the label away nor shows its error.
 */
export function useAction() {
  const [working, setWorking] = useState<string | undefined>();
  const [problem, setProblem] = useState<Problem | undefined>();
  const lastRun = useRef(0);
  const run = useCallback(async <T,>(label: string, fn: () => Promise<T>): Promise<T | undefined> => {
    const id = ++lastRun.current;
    setWorking(label);
    setProblem(undefined);
    try {
      return await fn();
    } catch (err) {
      if (id === lastRun.current) setProblem(problemOf(err));
      return undefined;
    } finally {
      if (id === lastRun.current) setWorking(undefined);
    }
  }, []);
  return { working, problem, run, setProblem };
}

/**
 * Reads each time `deps` change, and hands the answer to `use` only if no later read started meanwhile: an answer to
 * an earlier ask (another workspace, call or range) can arrive after a later one's, and must not replace it. With
 * `shown`, the read runs as that action (its label while it runs, its error); without, a failure is dropped (a
 * read that has an answer for it gives it). Without `read`, nothing is read.
 */
export function useRead<T>(
  read: (() => Promise<T>) | undefined,
  use: (answer: T) => void,
  deps: unknown[],
  shown?: { action: ReturnType<typeof useAction>; label: string },
) {
  useEffect(() => {
    if (!read) return;
    let latest = true;
    const answered = async () => {
      try {
        const answer = await read();
        if (latest) use(answer);
      } catch (err) {
        if (latest) throw err;
      }
    };
    void (shown ? shown.action.run(shown.label, answered) : answered().catch(() => undefined));
    return () => {
      latest = false;
    };
  }, deps);
}

interface PageResult<T> {
  data: T[];
  response: Response;
}

/**
 * One page of a list at a time, with the API's cursors: Next follows X-Next-Cursor, Previous goes
 * back to the cursor the current page was asked with. `deps` changing starts again from the first page.
 */
export function usePaged<T>(fetchPage: (cursor: string | undefined) => Promise<PageResult<T>>, deps: unknown[]) {
  const [items, setItems] = useState<T[] | undefined>();
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [next, setNext] = useState<string | undefined>();
  const [version, setVersion] = useState(0);
  const action = useAction();
  const cursor = cursors[cursors.length - 1];

  useEffect(() => {
    setCursors([undefined]);
  }, deps);

  useRead(
    () => fetchPage(cursor),
    (page) => {
      setItems(page.data);
      setNext(page.response.headers.get('x-next-cursor') ?? undefined);
    },
    [cursors, version],
    { action, label: 'Loading' },
  );

  return {
    items,
    problem: action.problem,
    loading: action.working !== undefined,
    page: cursors.length,
    hasNext: next !== undefined,
    hasPrevious: cursors.length > 1,
    next: () => next && setCursors([...cursors, next]),
    previous: () => setCursors(cursors.slice(0, -1)),
    reload: () => setVersion((v) => v + 1),
  };
}

export function Pager({ list }: { list: ReturnType<typeof usePaged<any>> }) {
  if (!list.hasNext && !list.hasPrevious) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" onClick={list.previous} disabled={!list.hasPrevious || list.loading}>
        ← Previous
      </button>
      <span>Page {list.page}</span>
      <button type="button" onClick={list.next} disabled={!list.hasNext || list.loading}>
        Next →
      </button>
    </nav>
  );
}

/** A list's table: its column headers, and a caption for screen readers when the page gives one. */
export function ListTable(props: { caption?: string; columns: string[]; children: ComponentChildren }) {
  return (
    <table>
      {props.caption ? <caption class="sr-only">{props.caption}</caption> : null}
      <thead>
        <tr>
          {props.columns.map((column) => (
            <th scope="col" key={column}>
              {column}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{props.children}</tbody>
    </table>
  );
}

export function Field(props: { label: string; hint?: string; children: ComponentChildren }) {
  return (
    <label class="field">
      <span class="label">{props.label}</span>
      {props.children}
      {props.hint ? <small>{props.hint}</small> : null}
    </label>
  );
}

/** A form that submits through `onSubmit` (the browser's own validation first); an async one reports its errors itself (useAction). */
export function Form(props: {
  id?: string;
  title: string;
  onSubmit: () => void | Promise<void>;
  children: ComponentChildren;
  submit: string;
  disabled?: boolean;
}) {
  const submit = (e: Event) => {
    e.preventDefault();
    void props.onSubmit();
  };
  return (
    <form id={props.id} class="card form" onSubmit={submit} aria-label={props.title}>
      <h3>{props.title}</h3>
      {props.children}
      <button type="submit" class="primary" disabled={props.disabled}>
        {props.submit}
      </button>
    </form>
  );
}

export function Status({ value }: { value: string }) {
  return <span class={`status status-${value.toLowerCase()}`}>{value}</span>;
}

export const when = (iso: string | undefined | null) => (iso ? new Date(iso).toLocaleString() : '—');

/** A value from an input event. */
export const valueOf = (e: Event) => (e.currentTarget as HTMLInputElement).value;

/** A secret shown once, with a copy button. */
export function ShownOnce({ label, secret, onDismiss }: { label: string; secret: string; onDismiss: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    await navigator.clipboard.writeText(secret).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  };
  return (
    <div class="card once" role="status">
      <p>
        <strong>{label}</strong> It is shown only this once: copy it now.
      </p>
      <code class="secret" data-testid="shown-once">
        {secret}
      </code>
      <div class="row">
        <button type="button" onClick={() => void copy()}>
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" onClick={onDismiss}>
          I have stored it
        </button>
      </div>
    </div>
  );
}

const numbers = new Intl.NumberFormat();

/** A count as the operator's locale writes it (26,002), from a number or an int64 decimal string, without rounding. */
export function formatNumber(value: number | bigint | string | undefined | null): string {
  if (value === undefined || value === null || value === '') return '—';
  if (typeof value === 'string') return /^-?\d+$/.test(value) ? numbers.format(BigInt(value)) : value;
  return numbers.format(value);
}

/** A multiplier in parts per million as a factor: 1000000 → ×1, 4000000 → ×4, 250000 → ×0.25. */
export function multiplier(ppm: string | number): string {
  return `×${new Intl.NumberFormat(undefined, { maximumFractionDigits: 6 }).format(Number(ppm) / 1_000_000)}`;
}

/**
 * What `lookup` gives for each of `ids`, asked once per id and shown as the answers arrive (one that fails is left
 * out). With `list`, a read that names many at once (a page of a list), several ids wanted are first looked for in
 * it (read once); only those it does not name are read one by one.
 */
function useLookups<T>(ids: string[], lookup: (id: string) => Promise<T>, list?: () => Promise<Record<string, T>>): Record<string, T> {
  const [found, setFound] = useState<Record<string, T>>({});
  const asked = useRef(new Set<string>());
  const listed = useRef<Promise<Record<string, T>> | undefined>(undefined);
  const wanted = [...new Set(ids)].filter((id) => !asked.current.has(id));
  useEffect(() => {
    if (wanted.length === 0) return;
    for (const id of wanted) asked.current.add(id);
    const add = (more: Record<string, T>) => setFound((known) => ({ ...known, ...more }));
    void (async () => {
      if (list && wanted.length > 1) listed.current ??= list().catch(() => ({}));
      const many = (await listed.current) ?? {};
      add(many);
      const answers = await Promise.all(
        wanted
          .filter((id) => !(id in many))
          .map((id) =>
            lookup(id).then(
              (value) => [id, value] as const,
              () => undefined,
            ),
          ),
      );
      add(Object.fromEntries(answers.filter((a) => a !== undefined)));
    })();
  }, [wanted.join(',')]);
  return found;
}

/**
 * The external user ids of a workspace's accesses, for the ids a page shows: the newest 100 users in one read
 * (listWorkspaceUsers), then each access that is not among them once (getWorkspaceAccess).
 */
export function useAccessNames(client: Client, workspaceId: string, accessIds: string[]): Record<string, string> {
  return useLookups(
    accessIds,
    (accessId) => getWorkspaceAccess({ client, path: { accessId } }).then((res) => res.data.externalUserId),
    () =>
      listWorkspaceUsers({ client, path: { workspaceId }, query: { limit: 100 } }).then((page) =>
        Object.fromEntries(page.data.map((user) => [user.access.id, user.externalUserId])),
      ),
  );
}

/** Inference keys by id (getInferenceKey: name, prefix and access; never the plaintext), read once each (no list names them across a workspace). */
export function useInferenceKeys(client: Client, keyIds: string[]): Record<string, ApiKeyDto> {
  return useLookups(keyIds, (keyId) => getInferenceKey({ client, path: { keyId } }).then((res) => res.data));
}

/**
 * A user chosen by external id, however many users the workspace has: the id typed is looked up with the
 * list's `externalUserId` filter; the newest users are offered as suggestions as it is typed.
 */
export function UserPicker(props: {
  client: Client;
  workspaceId: string;
  chosen: WorkspaceUserDto | undefined;
  onChoose: (user: WorkspaceUserDto) => void;
  label?: string;
}) {
  const [query, setQuery] = useState(props.chosen?.externalUserId ?? '');
  const [recent, setRecent] = useState<WorkspaceUserDto[]>([]);
  const action = useAction();
  const listId = `users-${props.workspaceId}-${props.label ?? 'user'}`.replace(/\W/g, '-');
  useEffect(() => {
    listWorkspaceUsers({ client: props.client, path: { workspaceId: props.workspaceId }, query: { limit: 20 } }).then(
      (page) => setRecent(page.data),
      () => setRecent([]),
    );
  }, [props.workspaceId]);
  useEffect(() => setQuery(props.chosen?.externalUserId ?? ''), [props.chosen?.access.id]);
  const find = async (e: Event) => {
    e.preventDefault();
    const externalUserId = query.trim();
    if (!externalUserId) return;
    const page = await action.run('Finding the user…', () =>
      listWorkspaceUsers({ client: props.client, path: { workspaceId: props.workspaceId }, query: { externalUserId, limit: 1 } }),
    );
    if (!page) return;
    const user = page.data[0];
    if (user) props.onChoose(user);
    else action.setProblem({ message: `No user with the external id ${externalUserId} in this workspace.` });
  };
  return (
    <form class="toolbar" role="search" aria-label={`Find a ${props.label ?? 'user'}`} onSubmit={(e) => void find(e)}>
      <Field label={props.label ?? 'User'} hint="The user's external id (your application's id for them)">
        <input type="search" name="externalUserId" list={listId} required value={query} onInput={(e) => setQuery(valueOf(e))} />
      </Field>
      <datalist id={listId}>
        {recent.map((u) => (
          <option key={u.access.id} value={u.externalUserId}>
            {u.email}
          </option>
        ))}
      </datalist>
      <button type="submit" disabled={!!action.working}>
        Find
      </button>
      {props.chosen ? (
        <span role="status">
          {props.chosen.externalUserId} · {props.chosen.email} · <Status value={props.chosen.access.status} />
        </span>
      ) : null}
      <ErrorNote problem={action.problem} />
    </form>
  );
}

const moneyFormats = new Map<string, Intl.NumberFormat>();

/** One formatter per currency: at least two decimals (a cent), at most six (a micro-unit, the API's precision). */
function moneyFormat(currency: string): Intl.NumberFormat {
  let format = moneyFormats.get(currency);
  if (!format) {
    try {
      format = new Intl.NumberFormat(undefined, { style: 'currency', currency, minimumFractionDigits: 2, maximumFractionDigits: 6 });
    } catch {
      // A code the browser does not know: the amount with the code after it.
      format = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 6 });
    }
    moneyFormats.set(currency, format);
  }
  return format;
}

/**
 * An amount in millionths of `currency` (the API's costMicros, a decimal string) as the operator's locale writes it:
 * 24000 USD → $0.024. Formatted from its exact decimal, so a large total is not rounded through a float.
 */
export function formatMoney(micros: bigint | string | number | undefined | null, currency: string): string {
  if (micros === undefined || micros === null || micros === '') return '—';
  const m = typeof micros === 'bigint' ? micros : BigInt(typeof micros === 'number' ? Math.round(micros) : micros);
  const abs = m < 0n ? -m : m;
  const decimal = `${m < 0n ? '-' : ''}${abs / 1_000_000n}.${String(abs % 1_000_000n).padStart(6, '0')}`;
  const format = moneyFormat(currency);
  // Intl formats a decimal string exactly (the lib's type knows only numbers and bigints).
  const text = format.format(decimal as unknown as number);
  return format.resolvedOptions().style === 'currency' ? text : `${text} ${currency}`;
}

/** A decimal amount as typed (12, 12.5, 0.000001) → millionths, exactly: '12.5' → '12500000'; undefined when it is not one. */
export function microsOf(amount: string): string | undefined {
  const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(amount.trim());
  if (!match) return undefined;
  return String(BigInt(match[1]!) * 1_000_000n + BigInt((match[2] ?? '').padEnd(6, '0')));
}

/** A datetime-local input's value (the operator's local time) as RFC 3339 UTC. */
export const toInstant = (local: string) => new Date(local).toISOString();

/** Now, to the minute, as a datetime-local input's value (the operator's local time). */
export function localNow(offsetMs = 0): string {
  const d = new Date(Date.now() + offsetMs);
  d.setSeconds(0, 0);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}
