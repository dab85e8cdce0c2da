import { useState } from 'preact/hooks';
import {
  archiveWorkspace,
  createWorkspace,
  idempotencyKey,
  listWorkspaces,
  updateWorkspace,
  type Client,
  type WorkspaceDto,
} from '../api.js';
import {
  Empty,
  ErrorNote,
  Field,
  Form,
  Pager,
  Status,
  usePaged,
  useAction,
  valueOf,
  when,
  Working,
  ListTable,
  WORKSPACES_CHANGED,
} from '../ui.js';

const changed = () => window.dispatchEvent(new Event(WORKSPACES_CHANGED));

export function WorkspacesPage({ client }: { client: Client }) {
  const [status, setStatus] = useState<'ACTIVE' | 'ARCHIVED' | ''>('ACTIVE');
  const list = usePaged((cursor) => listWorkspaces({ client, query: { cursor, limit: 20, ...(status ? { status } : {}) } }), [status]);
  const action = useAction();
  const [name, setName] = useState('');
  const [renaming, setRenaming] = useState<{ id: string; name: string } | undefined>();

  const create = async () => {
    const done = await action.run('Creating the workspace…', () =>
      createWorkspace({ client, body: { name }, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (done) {
      setName('');
      list.reload();
      changed();
    }
  };
  const rename = async () => {
    if (!renaming) return;
    const done = await action.run('Renaming…', () =>
      updateWorkspace({ client, path: { workspaceId: renaming.id }, body: { name: renaming.name } }),
    );
    if (done) {
      setRenaming(undefined);
      list.reload();
      changed();
    }
  };
  const archive = async (w: WorkspaceDto) => {
    if (!window.confirm(`Archive ${w.name}? Its gateway calls stop, and it becomes read-only.`)) return;
    if (await action.run('Archiving…', () => archiveWorkspace({ client, path: { workspaceId: w.id } }))) {
      list.reload();
      changed();
    }
  };

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Workspaces</h1>
      <p class="lead">A workspace is a tenant: its connections, plans, users and usage belong to it alone.</p>
      <Form title="Create a workspace" submit="Create workspace" onSubmit={create} disabled={!!action.working}>
        <Field label="Name">
          <input name="workspaceName" required maxLength={200} value={name} onInput={(e) => setName(valueOf(e))} />
        </Field>
      </Form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
      <div class="toolbar">
        <Field label="Status">
          <select value={status} onChange={(e) => setStatus(valueOf(e) as typeof status)}>
            <option value="ACTIVE">Active</option>
            <option value="ARCHIVED">Archived</option>
            <option value="">All</option>
          </select>
        </Field>
      </div>
      <ErrorNote problem={list.problem} />
      {list.items?.length === 0 ? (
        <Empty>No workspace here yet. Create one above, then choose it in the Workspace menu to add a provider connection.</Empty>
      ) : (
        <ListTable caption="Workspaces" columns={['Name', 'Status', 'Created', 'Actions']}>
          {list.items?.map((w) => (
            <tr key={w.id}>
              <td>
                {renaming?.id === w.id ? (
                  <form
                    class="inline"
                    onSubmit={(e) => {
                      e.preventDefault();
                      void rename();
                    }}
                  >
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
                  </form>
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
                    <button type="button" class="danger" onClick={() => void archive(w)}>
                      Archive
                    </button>
                  </>
                ) : null}
              </td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}
