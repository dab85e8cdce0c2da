/** The console's state hooks: an action's progress and error, reads that keep only the latest answer, paged lists, form fields. */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { problemOf, type Problem } from './api.js';

/** A value from an input event. */
export const valueOf = (e: Event) => (e.currentTarget as HTMLInputElement).value;

/**
 * An action's state: run(fn) shows `label` while it runs, the API's error when it fails, and resolves to fn's
 * result (undefined when it failed). When runs overlap, what shows is the last one's: an earlier run that ends first
 * neither takes the label away nor shows its error.
 */
export function useAction() {
  const [working, setWorking] = useState<string | undefined>();
  const [problem, setProblem] = useState<Problem | undefined>();
  const lastRun = useRef(0);
  const run = useCallback(async <T>(label: string, fn: () => Promise<T>): Promise<T | undefined> => {
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

export type Action = ReturnType<typeof useAction>;

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
  shown?: { action: Action; label: string },
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

/** Where a page of a list starts (its cursor; none: the first page), and how many items it holds. */
interface PageQuery {
  cursor: string | undefined;
  limit: number;
}

/** A list's filters as the API takes them: those that are set, and no other. */
export function onlySet<F extends Record<string, string>>(filters: F): { [K in keyof F]?: Exclude<F[K], ''> } {
  return Object.fromEntries(Object.entries(filters).filter(([, value]) => value !== '')) as { [K in keyof F]?: Exclude<F[K], ''> };
}

/**
 * One page of a list at a time (20 items), with the API's cursors: Next follows X-Next-Cursor, Previous goes
 * back to the cursor the current page was asked with. `deps` changing starts again from the first page.
 */
export function usePaged<T>(fetchPage: (page: PageQuery) => Promise<PageResult<T>>, deps: unknown[]) {
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
    () => fetchPage({ cursor, limit: 20 }),
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

export type Paged<T> = ReturnType<typeof usePaged<T>>;

/**
 * The first page of a list (its first 100 at most: the choices of a select, the names of ids), read again when `deps`
 * change; none when it cannot be read. Undefined until the first answer.
 */
export function useFirstPage<T>(read: () => Promise<{ data: T[] }>, deps: unknown[]): T[] | undefined {
  const [items, setItems] = useState<T[] | undefined>();
  useRead(
    () =>
      read().then(
        (page) => page.data,
        () => [],
      ),
    setItems,
    deps,
  );
  return items;
}

/**
 * A form's fields (or a list's filters) as one state: `set(field)` is the handler of the input that edits one (`bind`
 * and `bindChange` give an input both its value and that handler), `put` changes some at once, `reset` gives the form
 * back its first values.
 */
export function useFields<F extends Record<string, unknown>>(initial: F | (() => F)) {
  const [values, setValues] = useState<F>(initial);
  const set = (field: keyof F) => (e: Event) => setValues({ ...values, [field]: valueOf(e) });
  return {
    values,
    set,
    /** A field's value and its input's handler: kept as it is typed. */
    bind: <K extends keyof F>(field: K) => ({ value: values[field], onInput: set(field) }),
    /** A field's value and its handler when it changes: a select's choice, a filter's text once the field is left. */
    bindChange: <K extends keyof F>(field: K) => ({ value: values[field], onChange: set(field) }),
    put: (changes: Partial<F>) => setValues({ ...values, ...changes }),
    replace: setValues,
    reset: () => setValues(initial),
  };
}

export type Fields<F extends Record<string, unknown>> = ReturnType<typeof useFields<F>>;

/**
 * An input's value that starts as `value` and goes back to it when `value` changes (another user chosen, the
 * workspace's currency saved), but not on mount: what is typed before the first effect runs is kept.
 */
export function useFollowing<T>(value: T) {
  const [state, setState] = useState(value);
  const followed = useRef(value);
  useEffect(() => {
    if (Object.is(followed.current, value)) return;
    followed.current = value;
    setState(value);
  }, [value]);
  return [state, setState] as const;
}
