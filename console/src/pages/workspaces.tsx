import { useState } from 'preact/hooks';
import { archiveWorkspace, createWorkspace, idempotent, listWorkspaces, updateWorkspace, type Client } from '../api.js';
import { ArchiveButton } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { when } from '../format.js';
import { onlySet, useAction, usePaged, valueOf } from '../hooks.js';
import { ActionNotes, ErrorNote, Form, Input, Page, Select, Status, Toolbar, WORKSPACES_CHANGED } from '../ui.js';

const changed = () => window.dispatchEvent(new Event(WORKSPACES_CHANGED));

export function WorkspacesPage({ client }: { client: Client }) {
  const [status, setStatus] = useState<'ACTIVE' | 'ARCHIVED' | ''>('ACTIVE');
  const list = usePaged((page) => listWorkspaces({ client, query: { ...page, ...onlySet({ status }) } }), [status]);
  const action = useAction();
  const [name, setName] = useState('');
  const [renaming, setRenaming] = useState<{ id: string; name: string } | undefined>();
  const done = () => {
    list.reload();
    changed();
  };

  const create = async () => {
    if (await action.run('Creating the workspace…', () => createWorkspace({ client, body: { name }, headers: idempotent() }))) {
      setName('');
      done();
    }
  };
  const rename = async () => {
    if (!renaming) return;
    const saved = await action.run('Renaming…', () =>
      updateWorkspace({ client, path: { workspaceId: renaming.id }, body: { name: renaming.name } }),
    );
    if (saved) {
      setRenaming(undefined);
      done();
    }
  };

  return (
    <Page title="Workspaces" lead="A workspace is a tenant: its connections, plans, users and usage belong to it alone.">
      <Form
        fold="New workspace"
        operation="createWorkspace"
        title="Create a workspace"
        submit="Create workspace"
        onSubmit={create}
        disabled={!!action.working}
      >
        <Input label="Name" name="workspaceName" required maxLength={200} value={name} onInput={(e) => setName(valueOf(e))} />
      </Form>
      <ActionNotes action={action} />
      <div class="toolbar">
        <Select
          label="Status"
          choices={{ ACTIVE: 'Active', ARCHIVED: 'Archived', '': 'All' }}
          value={status}
          onChange={(e) => setStatus(valueOf(e) as typeof status)}
        />
      </div>
      <ErrorNote problem={list.problem} />
      <PagedTable
        list={list}
        caption="Workspaces"
        columns={['Name', 'Status', 'Created', 'Actions']}
        empty="No workspace here yet. Create one with New workspace above, then choose it in the Workspace menu to add a provider connection."
        row={(w) => (
          <tr>
            <td>
              {renaming?.id === w.id ? (
                <Toolbar class="inline" onSubmit={() => void rename()}>
                  <input
                    aria-label="New name"
                    required
                    value={renaming.name}
                    onInput={(e) => setRenaming({ id: w.id, name: valueOf(e) })}
                  />
                  <button type="submit">Save</button>
                  <button type="button" onClick={() => setRenaming(undefined)}>
                    Cancel
                  </button>
                </Toolbar>
              ) : (
                <a href={`#/w/${w.id}/connections`}>{w.name}</a>
              )}
              <div class="id">{w.id}</div>
            </td>
            <td>
              <Status value={w.status} />
            </td>
            <td>{when(w.createdAt)}</td>
            <td class="actions">
              {w.status === 'ACTIVE' ? (
                <>
                  <button type="button" onClick={() => setRenaming({ id: w.id, name: w.name })}>
                    Rename
                  </button>
                  <ArchiveButton
                    operation="archiveWorkspace"
                    action={action}
                    name={w.name}
                    stops="Its gateway calls stop, and it becomes read-only."
                    call={() => archiveWorkspace({ client, path: { workspaceId: w.id } })}
                    onDone={done}
                  />
                </>
              ) : null}
            </td>
          </tr>
        )}
      />
    </Page>
  );
}
