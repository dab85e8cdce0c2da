import { useState } from 'preact/hooks';
import { getWorkspace, updateWorkspace, type PassthroughClass, type WorkspaceDto } from '../api.js';
import { ActionButton } from '../components/buttons.js';
import { classesLine, PassthroughClassesField } from '../components/passthrough-classes.js';
import { RetentionSettings } from '../components/retention.js';
import { useAction, useRead } from '../hooks.js';
import { ActionNotes, Figures, Form, Notice, Page, type PageProps } from '../ui.js';

/**
 * The workspace's settings: its name and currency, the passthrough classes its gateway calls may take whatever
 * their plan (a plan lets more through on the plans page), and how long its history is kept. Read here again, so the
 * page shows what is saved.
 */
export function SettingsPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const [saved, setSaved] = useState<WorkspaceDto>(workspace);
  const [classes, setClasses] = useState<PassthroughClass[]>(workspace.passthroughClasses);
  const [notice, setNotice] = useState<string | undefined>();
  const load = useAction();
  const action = useAction();
  const show = (w: WorkspaceDto) => {
    setSaved(w);
    setClasses(w.passthroughClasses);
  };
  useRead(async () => (await getWorkspace({ client, path: { workspaceId } })).data, show, [workspaceId], {
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
      <RetentionSettings client={client} workspaceId={workspaceId} />
    </Page>
  );
}
