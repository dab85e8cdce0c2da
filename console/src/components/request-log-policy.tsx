/**
 * A request log policy (the contract's RequestLogPolicy: docs/request-logs.md): whether a scope's gateway calls keep
 * their request and answer bodies (all, failed only, a sampled share, or off), how much of each body and for how long.
 * A route's policy comes first, then its plan's, then the workspace's; none on a scope leaves it to the next.
 */
import { useState } from 'preact/hooks';
import type { RequestLogMode, RequestLogPolicy } from '../api.js';
import { formatNumber } from '../format.js';
import { useAction, valueOf } from '../hooks.js';
import { ActionNotes, Form, Input, Notice, Select } from '../ui.js';

/** The policy as the fields hold it: mode '' is none (the next scope's applies); a share in percent. */
export interface PolicyDraft {
  mode: RequestLogMode | '';
  percent: string;
  maxBodyBytes: string;
  retentionDays: string;
}

const MODES: Record<RequestLogMode, string> = {
  all: 'All calls',
  failed: 'Failed calls only',
  sampled: 'A sampled share of calls',
  off: 'Off (over the plan’s and workspace’s)',
};

/** The bounds of a kept log: each field, its label and hint, its range and the API's default. */
const BOUNDS = [
  ['maxBodyBytes', 'Body cap (bytes)', 'Each body cut there, and said so; 1,024 to 1,048,576', 1024, 1048576, 65536],
  ['retentionDays', 'Kept (days)', "From the call's start; 1 to 90", 1, 90, 7],
] as const;

/** A stored policy (null: none) as the fields start. */
export const draftOf = (policy: RequestLogPolicy | null | undefined): PolicyDraft => ({
  mode: policy?.mode ?? '',
  percent: policy?.sampleRate === undefined ? '' : String(Number((policy.sampleRate * 100).toPrecision(12))),
  maxBodyBytes: policy?.maxBodyBytes === undefined ? '' : String(policy.maxBodyBytes),
  retentionDays: policy?.retentionDays === undefined ? '' : String(policy.retentionDays),
});

/** The fields as the API takes them: null for none; a bound left empty is the API's default. */
export function policyOf(draft: PolicyDraft): RequestLogPolicy | null {
  if (!draft.mode) return null;
  return {
    mode: draft.mode,
    ...(draft.mode === 'sampled' ? { sampleRate: Number(draft.percent) / 100 } : {}),
    ...(draft.maxBodyBytes.trim() ? { maxBodyBytes: Number(draft.maxBodyBytes) } : {}),
    ...(draft.retentionDays.trim() ? { retentionDays: Number(draft.retentionDays) } : {}),
  };
}

/** A policy in a line: "10% of calls sampled · bodies up to 65,536 bytes · kept 7 days"; `none` when there is none. */
export function policyLine(policy: RequestLogPolicy | null | undefined, none: string): string {
  if (!policy) return none;
  if (policy.mode === 'off') return 'off';
  const which =
    policy.mode === 'sampled'
      ? `${Number(((policy.sampleRate ?? 0) * 100).toPrecision(12))}% of calls sampled`
      : MODES[policy.mode].toLowerCase();
  return [
    which,
    ...(policy.maxBodyBytes === undefined ? [] : [`bodies up to ${formatNumber(policy.maxBodyBytes)} bytes`]),
    ...(policy.retentionDays === undefined ? [] : [`kept ${policy.retentionDays} ${policy.retentionDays === 1 ? 'day' : 'days'}`]),
  ].join(' · ');
}

/** The policy's fields, named after `name`: its mode (or none: `inherit` says what applies then), share, cap, days. */
export function RequestLogFields(props: { name: string; inherit: string; value: PolicyDraft; onChange: (draft: PolicyDraft) => void }) {
  const { name, value, onChange } = props;
  const set = (field: keyof PolicyDraft) => (e: Event) => onChange({ ...value, [field]: valueOf(e) });
  const kept = value.mode !== '' && value.mode !== 'off';
  return (
    <fieldset>
      <legend>Request logs</legend>
      <div class="grid">
        <Select
          label="Keep bodies of"
          name={`${name}Mode`}
          choices={{ '': props.inherit, ...MODES }}
          value={value.mode}
          onChange={set('mode')}
        />
        {value.mode === 'sampled' ? (
          <Input
            label="Share kept (%)"
            hint="Drawn when each call opens"
            name={`${name}Percent`}
            type="number"
            min={0.001}
            max={100}
            step="any"
            required
            value={value.percent}
            onInput={set('percent')}
          />
        ) : null}
        {kept
          ? BOUNDS.map(([field, label, hint, min, max, byDefault]) => (
              <Input
                key={field}
                label={label}
                hint={hint}
                name={`${name}${field[0]!.toUpperCase()}${field.slice(1)}`}
                type="number"
                min={min}
                max={max}
                placeholder={String(byDefault)}
                value={value[field]}
                onInput={set(field)}
              />
            ))
          : null}
      </div>
    </fieldset>
  );
}

/**
 * A scope's policy as a form of its own: `save` sends it (null: none) through `operation`; `onSaved` gets the answer.
 * The policy saved is said in a line, from the next gateway call.
 */
export function RequestLogForm<T>(props: {
  operation: string;
  title: string;
  name: string;
  inherit: string;
  value: RequestLogPolicy | null | undefined;
  save: (policy: RequestLogPolicy | null) => Promise<T>;
  onSaved: (saved: T) => void;
}) {
  const [draft, setDraft] = useState<PolicyDraft>(() => draftOf(props.value));
  const [notice, setNotice] = useState<string | undefined>();
  const action = useAction();
  const submit = async () => {
    setNotice(undefined);
    const policy = policyOf(draft);
    const res = await action.run('Saving the request log policy…', () => props.save(policy));
    if (res === undefined) return;
    setNotice(`Saved: ${policyLine(policy, props.inherit.toLowerCase())}, from the next gateway call.`);
    props.onSaved(res);
  };
  return (
    <>
      <Form operation={props.operation} title={props.title} submit="Save request log policy" onSubmit={submit} disabled={!!action.working}>
        <RequestLogFields name={props.name} inherit={props.inherit} value={draft} onChange={setDraft} />
      </Form>
      <ActionNotes action={action} />
      <Notice text={notice} class="notice" />
    </>
  );
}
