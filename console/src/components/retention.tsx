import { useState } from 'preact/hooks';
import { getRetentionPolicy, updateRetentionPolicy, type Client, type RetentionPolicyDto } from '../api.js';
import { useAction, useRead } from '../hooks.js';
import { ActionNotes, Figures, Form, Input, Notice } from '../ui.js';

const days = (n: number) => (n === 1 ? '1 day' : `${n} days`);

/**
 * The workspace's retention policy (docs/operations.md, "Retention"): how long its detail (calls, usage events,
 * webhook attempts) and its rollups (the summaries' source) are kept; the history job applies a change within the hour.
 */
export function RetentionSettings({ client, workspaceId }: { client: Client; workspaceId: string }) {
  const [saved, setSaved] = useState<RetentionPolicyDto | undefined>();
  const [detail, setDetail] = useState('');
  const [rollup, setRollup] = useState('');
  const [notice, setNotice] = useState<string | undefined>();
  const load = useAction();
  const action = useAction();
  const show = (p: RetentionPolicyDto | undefined) => {
    if (!p) return;
    setSaved(p);
    setDetail(String(p.detailDays));
    setRollup(String(p.rollupDays));
  };
  useRead(async () => (await getRetentionPolicy({ client, path: { workspaceId } })).data, show, [workspaceId], {
    action: load,
    label: 'Reading the retention policy…',
  });
  const save = async () => {
    setNotice(undefined);
    const res = await action.run('Saving the retention policy…', () =>
      updateRetentionPolicy({ client, path: { workspaceId }, body: { detailDays: Number(detail), rollupDays: Number(rollup) } }),
    );
    if (res) {
      show(res.data);
      setNotice(`Saved: detail kept ${days(res.data.detailDays)}, totals ${days(res.data.rollupDays)}, applied within the hour.`);
    }
  };
  return (
    <>
      <ActionNotes action={load} />
      <section class="card" aria-labelledby="retention-title">
        <h2 id="retention-title">Retention</h2>
        <Figures
          items={[
            ['Detail kept', saved ? days(saved.detailDays) : '…', { 'data-testid': 'retention-detail' }],
            ['Totals kept', saved ? days(saved.rollupDays) : '…', { 'data-testid': 'retention-rollup' }],
          ]}
        />
        <p>
          Usage events of a quota period not yet settled (and, with a billing connection, reconciled) are kept past the policy until it is.
        </p>
      </section>
      <Form title="Retention policy" submit="Save retention" onSubmit={save} disabled={!!action.working}>
        <Input
          label="Detail (days)"
          hint="Calls with their attempts, usage events and webhook attempts."
          name="detailDays"
          type="number"
          min={1}
          max={3650}
          required
          value={detail}
          onInput={(e) => setDetail((e.target as HTMLInputElement).value)}
        />
        <Input
          label="Totals (days)"
          hint="The usage rollups the summaries and charts read; at least as long as detail."
          name="rollupDays"
          type="number"
          min={1}
          max={3650}
          required
          value={rollup}
          onInput={(e) => setRollup((e.target as HTMLInputElement).value)}
        />
      </Form>
      <ActionNotes action={action} />
      <Notice text={notice} class="notice" />
    </>
  );
}
