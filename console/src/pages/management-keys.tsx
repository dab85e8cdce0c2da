import { useState } from 'preact/hooks';
import {
  createManagementKey,
  idempotent,
  listManagementKeys,
  listWorkspaces,
  revokeManagementKey,
  updateManagementKey,
  type Client,
  type ManagementKeyDto,
} from '../api.js';
import { ActionButton } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { when } from '../format.js';
import { useAction, useFirstPage, usePaged, valueOf } from '../hooks.js';
import { namesOf } from '../lookups.js';
import { ActionNotes, Empty, Folded, Form, Input, Page, Select, ShownOnce, Status, Toolbar } from '../ui.js';

/**
 * The keys that call the Admin API, for a root key: who they are (the name the audit shows), what they see, and
 * their revocation. A scoped key is refused the list (403), and the page says why.
 */
export function ManagementKeysPage({ client }: { client: Client }) {
  const list = usePaged((page) => listManagementKeys({ client, query: page }), []);
  const workspaces = useFirstPage(() => listWorkspaces({ client, query: { limit: 100, status: 'ACTIVE' } }), []);
  const names = namesOf(workspaces);
  const action = useAction();
  const [created, setCreated] = useState<string | undefined>();
  const [renaming, setRenaming] = useState<{ id: string; name: string } | undefined>();
  const rename = async () => {
    if (!renaming) return;
    const saved = await action.run('Renaming the key…', () =>
      updateManagementKey({ client, path: { managementKeyId: renaming.id }, body: { name: renaming.name } }),
    );
    if (saved) {
      setRenaming(undefined);
      list.reload();
    }
  };
  const refused = list.problem?.status === 403;
  return (
    <Page
      title="Management keys"
      lead="The keys that call the Admin API and sign in here. The audit log names each change's key by the name given here. A key's plaintext is shown once, when it is created; Nexus keeps only its hash."
    >
      {refused ? (
        <Empty>Only a root Management Key manages keys: sign in with one to see and create them.</Empty>
      ) : (
        <>
          <Folded label="New Management Key" operation="createManagementKey">
            <CreateKey
              client={client}
              workspaces={workspaces ?? []}
              onCreated={(key) => {
                setCreated(key);
                list.reload();
              }}
            />
          </Folded>
          <ActionNotes action={action} problem={list.problem} />
          {created ? <ShownOnce label="The new Management Key." secret={created} onDismiss={() => setCreated(undefined)} /> : null}
          <PagedTable
            list={list}
            caption="Management keys"
            columns={['Key', 'Sees', 'Created', 'Status', 'Actions']}
            empty="No stored key yet (the root key of NEXUS_MANAGEMENT_KEY is not stored). Create one with New Management Key above."
            row={(k) => (
              <tr>
                <td>
                  {renaming?.id === k.id ? (
                    <Toolbar class="inline" label={`Rename ${k.name}`} onSubmit={() => void rename()}>
                      <input
                        aria-label="New name"
                        required
                        maxLength={100}
                        value={renaming.name}
                        onInput={(e) => setRenaming({ id: k.id, name: valueOf(e) })}
                      />
                      <button type="submit">Save</button>
                      <button type="button" onClick={() => setRenaming(undefined)}>
                        Cancel
                      </button>
                    </Toolbar>
                  ) : (
                    <>
                      {k.name} <code>{k.prefix}…</code>
                    </>
                  )}
                  <div class="id">{k.id}</div>
                </td>
                <td>{scopeOf(k, names)}</td>
                <td>{when(k.createdAt)}</td>
                <td>{k.revokedAt ? <span>revoked {when(k.revokedAt)}</span> : <Status value="ACTIVE" />}</td>
                <td class="actions">
                  <button type="button" onClick={() => setRenaming({ id: k.id, name: k.name })}>
                    Rename
                  </button>
                  {k.revokedAt ? null : (
                    <ActionButton
                      operation="revokeManagementKey"
                      action={action}
                      danger
                      confirm={`Revoke ${k.name}? Requests with it are refused from the next one on.`}
                      label="Revoking the key…"
                      call={() => revokeManagementKey({ client, path: { managementKeyId: k.id } })}
                      onDone={list.reload}
                    >
                      Revoke
                    </ActionButton>
                  )}
                </td>
              </tr>
            )}
          />
        </>
      )}
    </Page>
  );
}

/** What a key sees: every workspace (a root key), or its workspaces by name (an archived one by its id). */
function scopeOf(k: ManagementKeyDto, names: Record<string, string>) {
  if (k.root) return <strong>every workspace (root)</strong>;
  return (
    <>
      {k.workspaceIds.map((id) => (
        <div key={id}>{names[id] ?? <span class="id">{id}</span>}</div>
      ))}
      {k.role ? <div>as {k.role}</div> : null}
    </>
  );
}

type ScopedRole = 'admin' | 'developer' | 'billing' | 'support' | 'viewer';

const ROLE_CHOICES: Record<ScopedRole | '', string> = {
  '': 'None: everything in its workspaces',
  admin: 'admin',
  developer: 'developer: connections, routes, plans, prices, users and keys',
  billing: 'billing: billing, budget, prices; reads the rest',
  support: 'support: reads; suspends accesses, revokes keys, replays',
  viewer: 'viewer: reads only',
};

function CreateKey(props: { client: Client; workspaces: { id: string; name: string }[]; onCreated: (key: string) => void }) {
  const { client, workspaces } = props;
  const action = useAction();
  const [name, setName] = useState('');
  const [kind, setKind] = useState<'scoped' | 'root'>('scoped');
  const [chosen, setChosen] = useState<string[]>([]);
  const [role, setRole] = useState<ScopedRole | ''>('');
  const create = async () => {
    if (kind === 'scoped' && chosen.length === 0) {
      action.setProblem({ message: 'Tick at least one workspace for a scoped key to see.' });
      return;
    }
    const body = kind === 'root' ? { name, root: true } : { name, workspaceIds: chosen, ...(role ? { role } : {}) };
    const res = await action.run('Creating the key…', () => createManagementKey({ client, body, headers: idempotent() }));
    if (res) {
      setName('');
      setChosen([]);
      setRole('');
      props.onCreated(res.data.key);
    }
  };
  return (
    <Form operation="createManagementKey" title="Create a Management Key" submit="Create key" onSubmit={create} disabled={!!action.working}>
      <Input
        label="Name"
        name="managementKeyName"
        hint="Who or what uses it: the audit log shows it beside each change the key makes."
        required
        maxLength={100}
        value={name}
        onInput={(e) => setName(valueOf(e))}
      />
      <Select
        label="Sees"
        name="managementKeyKind"
        choices={{ scoped: 'Only the workspaces ticked below', root: 'Every workspace, and manages keys (root)' }}
        value={kind}
        onChange={(e) => setKind(valueOf(e) as 'scoped' | 'root')}
      />
      {kind === 'scoped' ? (
        <Select
          label="Role"
          name="managementKeyRole"
          hint="Held to the role table in each workspace it sees, as a person with that role is."
          choices={ROLE_CHOICES}
          value={role}
          onChange={(e) => setRole(valueOf(e) as ScopedRole | '')}
        />
      ) : null}
      {kind === 'scoped' ? (
        <fieldset>
          <legend>Workspaces the key sees</legend>
          {workspaces.length === 0 ? <p>No active workspace yet.</p> : null}
          <div class="grid">
            {workspaces.map((w) => (
              <label class="check" key={w.id}>
                <input
                  type="checkbox"
                  name="managementKeyWorkspace"
                  value={w.id}
                  checked={chosen.includes(w.id)}
                  onChange={(e) => {
                    const ticked = e.currentTarget.checked;
                    setChosen(ticked ? [...chosen, w.id] : chosen.filter((id) => id !== w.id));
                  }}
                />
                <span>{w.name}</span>
              </label>
            ))}
          </div>
        </fieldset>
      ) : (
        <p class="lead">A root key can do everything, this page included: give it only to whoever runs Nexus.</p>
      )}
      <ActionNotes action={action} />
    </Form>
  );
}
