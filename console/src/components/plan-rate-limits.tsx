/** A plan's rate limits: the three the contract has, in a line, and a form that replaces them whatever the plan's status. */
import { useState } from 'preact/hooks';
import { setPlanRateLimits, type Client, type WorkspacePlanDto } from '../api.js';
import { formatNumber } from '../format.js';
import { useAction, valueOf } from '../hooks.js';
import { ActionNotes, Form, Input } from '../ui.js';

export const RATE_LIMITS = [
  ['requestsPerMinute', 'Requests per minute', 'requests/min'],
  ['tokensPerMinute', 'Tokens per minute', 'tokens/min'],
  ['concurrentCalls', 'Concurrent calls', 'at once'],
] as const;

type LimitField = (typeof RATE_LIMITS)[number][0];

/** A plan's rate limits in a line. */
export function limitsOf(p: WorkspacePlanDto): string {
  const parts = RATE_LIMITS.map(([field, , unit]) => (p.rateLimits[field] ? `${formatNumber(p.rateLimits[field])} ${unit}` : '')).filter(
    Boolean,
  );
  return parts.length ? parts.join(', ') : 'none';
}

/** The limits typed, as the API takes them: those set, and no other (an empty field: no limit). */
export function rateLimitsOf(values: Record<LimitField, string>): Partial<Record<LimitField, number>> {
  return Object.fromEntries(
    RATE_LIMITS.map(([field]) => [field, values[field].trim() ? Number(values[field]) : undefined] as const).filter(
      ([, v]) => v !== undefined,
    ),
  );
}

/**
 * Replaces a plan's rate limits (setPlanRateLimits), published or not: every limit the plan has is in the form, so
 * saving it keeps what the operator did not touch. Applies to the next call of every user on the plan.
 */
export function PlanRateLimits({ client, plan, onDone }: { client: Client; plan: WorkspacePlanDto; onDone: () => void }) {
  const [values, setValues] = useState<Record<LimitField, string>>(
    () =>
      Object.fromEntries(RATE_LIMITS.map(([field]) => [field, plan.rateLimits[field] ? String(plan.rateLimits[field]) : ''])) as Record<
        LimitField,
        string
      >,
  );
  const action = useAction();
  const save = async () => {
    const body = rateLimitsOf(values);
    if (await action.run('Saving the rate limits…', () => setPlanRateLimits({ client, path: { planId: plan.id }, body }))) onDone();
  };
  return (
    <div class="bindings">
      <Form
        operation="setPlanRateLimits"
        title={`Rate limits of ${plan.name}`}
        submit="Save rate limits"
        onSubmit={save}
        disabled={!!action.working}
      >
        <p class="lead">
          Per user of the plan, from the next call on every process{plan.status === 'ACTIVE' ? ', published as it is' : ''}. Empty: no
          limit.
        </p>
        <div class="grid">
          {RATE_LIMITS.map(([field, label]) => (
            <Input
              key={field}
              label={label}
              name={`limit-${field}`}
              type="number"
              min={1}
              max={2147483647}
              value={values[field]}
              onInput={(e) => setValues({ ...values, [field]: valueOf(e) })}
            />
          ))}
        </div>
      </Form>
      <ActionNotes action={action} />
    </div>
  );
}
