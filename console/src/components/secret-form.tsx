import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { valueOf, type Action } from '../hooks.js';
import { Form, SecretInput } from '../ui.js';

/**
 * A form that writes one secret (a provider's key or credential, a webhook signing secret), never shown again: `save`
 * runs as `action` under `working`, and `onDone` gets its answer.
 */
export function SecretForm<T>(props: {
  operation: string;
  action: Action;
  title: string;
  submit: string;
  label: string;
  hint?: string;
  working: string;
  save: (secret: string) => Promise<T>;
  onDone: (answer: T) => void;
  children?: ComponentChildren;
}) {
  const { action } = props;
  const [secret, setSecret] = useState('');
  const save = async () => {
    const answer = await action.run(props.working, () => props.save(secret));
    if (answer !== undefined) props.onDone(answer);
  };
  return (
    <Form operation={props.operation} title={props.title} submit={props.submit} disabled={!!action.working} onSubmit={save}>
      <SecretInput label={props.label} hint={props.hint} value={secret} onInput={(e) => setSecret(valueOf(e))} />
      {props.children}
    </Form>
  );
}
