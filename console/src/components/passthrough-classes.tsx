/**
 * The passthrough classes (the contract's PassthroughClass: docs/decisions.md, "Passthrough classes"): the classes of
 * gateway paths Nexus does not meter, which a workspace or a plan lets through, ticked one by one, each with what
 * letting it through opens.
 */
import type { PassthroughClass } from '../api.js';

/** Each class and what letting it through opens; a class the contract adds is a compile error here until it is named. */
const CLASSES: Record<PassthroughClass, string> = {
  files: 'files stored at the provider: uploaded, listed, downloaded, deleted',
  uploads: 'large uploads in parts, which become files',
  batches: 'batch jobs: model calls the provider runs later and bills',
  fine_tuning: 'fine-tuning jobs (training the provider bills) and tuned models',
  assistants: 'assistants and threads, whose runs call models',
  vector_stores: 'vector stores and file search stores',
  containers: 'code interpreter containers, billed per session',
  evals: 'evals, whose runs call models',
  stored_responses: 'stored responses, chat completions and conversations: read, listed, deleted',
  realtime_client_secrets: 'client secrets of Realtime sessions, which then bypass Nexus entirely',
  videos: 'video generation, billed per second',
  images: 'image generation a protocol does not meter (Imagen)',
  cached_contents: 'context caches, billed per hour stored',
  async_invoke: 'asynchronous invocations (Bedrock)',
  guardrails: 'guardrail checks (Bedrock)',
  other: 'any other path, model calls Nexus does not meter among them',
};
const NAMES = Object.keys(CLASSES) as PassthroughClass[];

/** A list of classes in a line. */
export const classesLine = (classes: readonly PassthroughClass[]) => (classes.length ? classes.join(', ') : 'none');

/** The classes as checkboxes named `name`; a change hands on the ticked ones, in the contract's order. */
export function PassthroughClassesField(props: {
  legend: string;
  name: string;
  value: readonly PassthroughClass[];
  onChange: (classes: PassthroughClass[]) => void;
}) {
  const { legend, name, value, onChange } = props;
  return (
    <fieldset>
      <legend>{legend}</legend>
      <p class="lead">
        A class let through is forwarded uncharged to quota, on the provider account every end user of the workspace shares: what one makes
        there, another can list, read or delete. Rate limits and the budget still apply.
      </p>
      <div class="grid">
        {NAMES.map((c) => (
          <label class="check" key={c}>
            <input
              type="checkbox"
              name={name}
              value={c}
              checked={value.includes(c)}
              onChange={(e) => {
                const ticked = e.currentTarget.checked;
                onChange(NAMES.filter((n) => (n === c ? ticked : value.includes(n))));
              }}
            />
            <span>
              <code>{c}</code> <small>{CLASSES[c]}</small>
            </span>
          </label>
        ))}
      </div>
    </fieldset>
  );
}
