/** The buttons of a list's rows: one that runs a call (after a confirmation when it cannot be undone), one that opens a row's detail. */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { Action } from '../hooks.js';
import { useAllowed } from '../ui.js';

/**
 * A button that runs one call as `action` (its label while it runs, its error when it fails), once the operator has
 * agreed to `confirm` when there is one; `onDone` gets the call's answer when it succeeded.
 */
export function ActionButton<T>(props: {
  /** The operation it calls: a caller whose role may not call it sees no button. */
  operation?: string;
  action: Action;
  label: string;
  call: () => Promise<T>;
  confirm?: string;
  onDone?: (answer: T) => void;
  danger?: boolean;
  disabled?: boolean;
  children: ComponentChildren;
}) {
  const allowed = useAllowed();
  const click = async () => {
    if (props.confirm && !window.confirm(props.confirm)) return;
    const answer = await props.action.run(props.label, props.call);
    if (answer !== undefined) props.onDone?.(answer);
  };
  if (props.operation && !allowed(props.operation)) return null;
  return (
    <button type="button" class={props.danger ? 'danger' : undefined} disabled={props.disabled} onClick={() => void click()}>
      {props.children}
    </button>
  );
}

/** Archives a resource (for good: the operator confirms first, told what stops), then `onDone`. */
export function ArchiveButton(props: {
  operation: string;
  action: Action;
  name: string;
  stops: string;
  call: () => Promise<unknown>;
  onDone: () => void;
}) {
  const { action, call, onDone } = props;
  return (
    <ActionButton
      operation={props.operation}
      action={action}
      danger
      confirm={`Archive ${props.name}? ${props.stops}`}
      label="Archiving…"
      call={call}
      onDone={onDone}
    >
      Archive
    </ActionButton>
  );
}

/** Which of a list's rows has its detail open: one at a time; `toggle` opens a row's, or closes it when it is the one open. */
export function useOpenRow() {
  const [open, setOpen] = useState<string | undefined>();
  return { open, is: (id: string) => open === id, toggle: (id: string) => setOpen(open === id ? undefined : id), set: setOpen };
}

/** The button that opens a row's detail (`show`) and closes it (`hide`). */
export function ExpandButton(props: { rows: ReturnType<typeof useOpenRow>; id: string; show: string; hide: string }) {
  const expanded = props.rows.is(props.id);
  return (
    <button type="button" aria-expanded={expanded} onClick={() => props.rows.toggle(props.id)}>
      {expanded ? props.hide : props.show}
    </button>
  );
}
