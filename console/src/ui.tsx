/** The console's building blocks: a page's frame, errors, empty states, progress, statuses, forms and their fields. */
import { createContext, Fragment, type ComponentChildren, type JSX } from 'preact';
import { useContext, useState } from 'preact/hooks';
import type { Client, Problem, WorkspaceDto } from './api.js';
import type { Action } from './hooks.js';

/** What the shell gives each page of a workspace. */
export interface PageProps {
  client: Client;
  workspace: WorkspaceDto;
  /** The rest of the route after the page's name (an id a page opens). */
  rest: string[];
  /** What follows the route in the URL, after `?` (a list's filters): a page's own state, to link to. */
  query: string;
  /** Replaces the URL's query (not a step of the browser's history). */
  setQuery: (query: string) => void;
}

/**
 * Whether the caller (the person signed in, or the key) may call an operation where the page is, by the role table
 * (getCaller): forms and buttons of operations it may not call are not shown. The server refuses them anyway.
 */
export const Allowed = createContext<(operationId: string) => boolean>(() => true);
export const useAllowed = () => useContext(Allowed);

/** The window event the workspaces page sends when it created, renamed or archived a workspace (the header's picker listens). */
export const WORKSPACES_CHANGED = 'nexus:workspaces-changed';

/** A page: its title (the heading the main region is labelled by), what it is for, and its content. */
export function Page(props: { title: string; lead?: ComponentChildren; children: ComponentChildren }) {
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">{props.title}</h1>
      {props.lead ? <p class="lead">{props.lead}</p> : null}
      {props.children}
    </section>
  );
}

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

/** An action's lines: what it is doing while it runs, then its error; `problem` (a list's) shows when the action has none. */
export function ActionNotes({ action, problem }: { action: Action; problem?: Problem | undefined }) {
  return (
    <>
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? problem} />
    </>
  );
}

/** What an action reports when it is done (a test's outcome, what was queued). */
export function Notice({ text, class: className }: { text: string | undefined; class?: string }) {
  if (!text) return null;
  return (
    <p class={className} role="status">
      {text}
    </p>
  );
}

export function Status({ value }: { value: string }) {
  return <span class={`status status-${value.toLowerCase()}`}>{value}</span>;
}

export function Field(props: { label: string; hint?: string | undefined; children: ComponentChildren }) {
  return (
    <label class="field">
      <span class="label">{props.label}</span>
      {props.children}
      {props.hint ? <small>{props.hint}</small> : null}
    </label>
  );
}

/**
 * The choices of a status filter: any status (''), then each status as read ('UPSTREAM_ERROR' → 'upstream error').
 */
export const statusChoices = (statuses: readonly string[], any: string): Record<string, string> => ({
  '': any,
  ...Object.fromEntries(statuses.map((s) => [s, s.toLowerCase().replace('_', ' ')])),
});

/**
 * A labelled select of `choices`, labels by value, in their order (no value is a number, which an object would put
 * first); those `disabled` are shown and not offered.
 */
export function Select(props: {
  label: string;
  hint?: string;
  choices: Record<string, string>;
  disabled?: readonly string[];
  value: string | undefined;
  onChange: (e: Event) => void;
  name?: string;
  required?: boolean;
}) {
  const { label, hint, choices, disabled, ...select } = props;
  return (
    <Field label={label} hint={hint}>
      <select {...select}>
        {Object.entries(choices).map(([value, text]) => (
          <option key={value} value={value} disabled={disabled?.includes(value)}>
            {text}
          </option>
        ))}
      </select>
    </Field>
  );
}

/** A labelled input: its label and hint, then the input's own attributes. */
export function Input(props: { label: string; hint?: string } & JSX.IntrinsicElements['input']) {
  const { label, hint, ...input } = props;
  return (
    <Field label={label} hint={hint}>
      <input {...input} />
    </Field>
  );
}

/** A secret, typed and never shown again: a password field, required, that the browser does not fill in. */
export function SecretInput(props: { label: string; hint?: string; name?: string; value: string; onInput: (e: Event) => void }) {
  const { label, hint, ...input } = props;
  return (
    <Field label={label} hint={hint}>
      <input type="password" autoComplete="off" required {...input} />
    </Field>
  );
}

/** A date and time in the operator's own time zone (a datetime-local input), said in its label. */
export function LocalTimeInput(props: {
  label: string;
  hint?: string;
  name?: string;
  required?: boolean;
  value: string;
  onInput?: (e: Event) => void;
  onChange?: (e: Event) => void;
}) {
  const { label, hint, ...input } = props;
  return (
    <Field label={`${label} (your local time)`} hint={hint}>
      <input type="datetime-local" {...input} />
    </Field>
  );
}

/** A figure of a panel: its term, its value, and the value's own attributes (a test id). */
type Figure = readonly [term: ComponentChildren, value: ComponentChildren, attributes?: { 'data-testid'?: string }];

/** A panel's figures: each term and its value. */
export function Figures({ items }: { items: Figure[] }) {
  return (
    <dl class="figures">
      {items.map(([term, value, attributes], i) => (
        <Fragment key={i}>
          <dt>{term}</dt>
          <dd {...attributes}>{value}</dd>
        </Fragment>
      ))}
    </dl>
  );
}

/**
 * A form that submits through `onSubmit` (the browser's own validation first); an async one reports its errors itself
 * (useAction). With `fold`, a list page's create form: folded behind a button of that label (Folded), `open` at first.
 */
export function Form(props: {
  /** The operation it submits: a caller whose role may not call it sees no form. */
  operation?: string;
  id?: string;
  title: string;
  onSubmit: () => void | Promise<void>;
  children: ComponentChildren;
  submit: string;
  disabled?: boolean;
  fold?: string;
  open?: boolean;
}) {
  const allowed = useAllowed();
  const submit = (e: Event) => {
    e.preventDefault();
    void props.onSubmit();
  };
  if (props.operation && !allowed(props.operation)) return null;
  const form = (
    <form id={props.id} class="card form" onSubmit={submit} aria-label={props.title}>
      <h3>{props.title}</h3>
      {props.children}
      <button type="submit" class="primary" disabled={props.disabled}>
        {props.submit}
      </button>
    </form>
  );
  return props.fold ? (
    <Folded label={props.fold} open={props.open}>
      {form}
    </Folded>
  ) : (
    form
  );
}

/** A form in a line (filters and options that apply as they change, a search, an inline rename): submitting it loads no page. */
export function Toolbar(props: { label?: string; class?: string; search?: boolean; onSubmit?: () => void; children: ComponentChildren }) {
  return (
    <form
      class={props.class ?? 'toolbar'}
      role={props.search ? 'search' : undefined}
      aria-label={props.label}
      onSubmit={(e) => {
        e.preventDefault();
        props.onSubmit?.();
      }}
    >
      {props.children}
    </form>
  );
}

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

/**
 * A create form folded behind its button, so a list page opens with its list: the button says what it makes and
 * whether the form is open (aria-expanded); the form follows it.
 */
export function Folded(props: { label: string; children: ComponentChildren; open?: boolean | undefined; operation?: string }) {
  const allowed = useAllowed();
  const [open, setOpen] = useState(props.open ?? false);
  // A caller whose role may not call the folded form's operation sees neither it nor its button.
  if (props.operation && !allowed(props.operation)) return null;
  return (
    <div class="folded">
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)}>
        {props.label}
      </button>
      {open ? props.children : null}
    </div>
  );
}
