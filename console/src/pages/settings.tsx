import { useState } from 'preact/hooks';
import { getWorkspace, updateWorkspace, type PassthroughClass, type WorkspaceDto } from '../api.js';
import { ActionButton } from '../components/buttons.js';
import { classesLine, PassthroughClassesField } from '../components/passthrough-classes.js';
import { policyLine, RequestLogForm } from '../components/request-log-policy.js';
import { RetentionSettings } from '../components/retention.js';
import { useAction, useRead } from '../hooks.js';
import { ActionNotes, Figures, Form, Notice, Page, type PageProps } from '../ui.js';

/**
 * The workspace's settings: its name and currency, the passthrough classes its gateway calls may take whatever
 * their plan (a plan lets more through on the plans page), its request log policy (a plan's or a route's comes first),
 * and how long its history is kept. Read here again, so the
 * page shows what is saved.
 */
export function SettingsPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [saved, setSaved] = useState<WorkspaceDto>(workspace);
  const [classes, setClasses] = useState<PassthroughClass[]>(workspace.passthroughClasses);
  const [notice, setNotice] = useState<string | undefined>();
  /** The workspace as read on this page (the request log form starts from it, not from the shell's copy). */
  const [read, setRead] = useState(false);
  const load = useAction();
  const action = useAction();
  const show = (w: WorkspaceDto) => {
    setSaved(w);
    setClasses(w.passthroughClasses);
  };
  const shown = (w: WorkspaceDto) => {
    show(w);
    setRead(true);
  };
  useRead(async () => (await getWorkspace({ client, path: { workspaceId } })).data, shown, [workspaceId], {
    action: load,
    label: 'Reading the workspace…',
  });
  const save = async () => {
    setNotice(undefined);
    const res = await action.run('Saving the passthrough classes…', () =>
      updateWorkspace({ client, path: { workspaceId }, body: { passthroughClasses: classes } }),
    );
    if (res) {
      show(res.data);
      setNotice(`Saved: ${classesLine(res.data.passthroughClasses)} let through, from the next gateway call.`);
    }
  };
  return (
    <Page
      title="Workspace settings"
      lead="Gateway paths Nexus does not meter (files, batches, fine-tuning…) are refused with 409, naming their class, unless the workspace or the caller's plan lets that class through."
    >
      <ActionNotes action={load} />
      <section class="card" aria-labelledby="workspace-title">
        <h2 id="workspace-title">{saved.name}</h2>
        <Figures
          items={[
            ['Currency', saved.currency ?? 'USD'],
            ['Passthrough classes', classesLine(saved.passthroughClasses), { 'data-testid': 'workspace-passthrough' }],
            [
              'Request logs',
              policyLine(saved.requestLog, 'none, unless a plan or a route asks'),
              { 'data-testid': 'workspace-request-log' },
            ],
          ]}
        />
      </section>
      {saved.allowUnmeteredPassthrough ? (
        <div class="notice" role="note">
          <p>
            This workspace lets every class through (<code>allowUnmeteredPassthrough</code>, deprecated), whatever is ticked below.
          </p>
          <ActionButton
            operation="updateWorkspace"
            action={action}
            label="Stopping every class…"
            call={() => updateWorkspace({ client, path: { workspaceId }, body: { allowUnmeteredPassthrough: false } })}
            onDone={(res) => show(res.data)}
          >
            Let only the ticked classes through
          </ActionButton>
        </div>
      ) : null}
      <Form
        operation="updateWorkspace"
        title="Passthrough classes"
        submit="Save passthrough classes"
        onSubmit={save}
        disabled={!!action.working}
      >
        <PassthroughClassesField legend="Let through for every plan" name="workspacePassthrough" value={classes} onChange={setClasses} />
      </Form>
      <ActionNotes action={action} />
      <Notice text={notice} class="notice" />
      {read ? (
        <RequestLogForm
          key={saved.id}
          operation="updateWorkspace"
          title="Request logs"
          name="workspaceRequestLog"
          inherit="None (unless a plan or a route asks)"
          value={saved.requestLog}
          save={(requestLog) => updateWorkspace({ client, path: { workspaceId }, body: { requestLog } })}
          onSaved={(res) => show(res.data)}
        />
      ) : null}
      <RetentionSettings client={client} workspaceId={workspaceId} />
    </Page>
  );
}
