import { useEffect, useState } from 'preact/hooks';
import {
  getWorkspaceAccess,
  idempotent,
  issueInferenceKey,
  listInferenceKeys,
  listWorkspaceUsers,
  revokeInferenceKey,
  type Client,
  type WorkspaceUserDto,
} from '../api.js';
import { ActionButton } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { UserPicker } from '../components/user-picker.js';
import { when } from '../format.js';
import { useAction, usePaged, useRead, valueOf } from '../hooks.js';
import { ActionNotes, Empty, Form, Input, Page, ShownOnce, Working, type PageProps } from '../ui.js';

export function KeysPage({ client, workspace, rest }: PageProps) {
  const workspaceId = workspace.id;
  const accessId = rest[0];
  const [user, setUser] = useState<WorkspaceUserDto | undefined>();
  const [anyUser, setAnyUser] = useState<boolean | undefined>();
  useEffect(() => {
    listWorkspaceUsers({ client, path: { workspaceId }, query: { limit: 1 } })
      .then((page) => setAnyUser(page.data.length > 0))
      .catch(() => setAnyUser(undefined));
  }, [workspaceId]);
  // A link to #/w/<ws>/keys/<accessId> names the access: its user is read to show who it is.
  useRead(
    accessId && user?.access.id !== accessId
      ? () =>
          getWorkspaceAccess({ client, path: { accessId } })
            .then((res) =>
              listWorkspaceUsers({ client, path: { workspaceId }, query: { externalUserId: res.data.externalUserId, limit: 1 } }),
            )
            .then(
              (page) => page.data[0],
              () => undefined,
            )
      : undefined,
    setUser,
    [accessId],
  );
  const choose = (chosen: WorkspaceUserDto) => {
    setUser(chosen);
    window.location.hash = `#/w/${workspaceId}/keys/${chosen.access.id}`;
  };
  return (
    <Page
      title="Inference keys"
      lead="The keys an end user calls the gateway with. A key's plaintext is shown once, when it is issued; revoking one leaves the plan and quota as they are."
    >
      {anyUser === undefined ? (
        <Working label="Loading users…" />
      ) : !anyUser ? (
        <Empty>
          No user yet: <a href={`#/w/${workspaceId}/users`}>provision a user</a>, then issue keys to them here.
        </Empty>
      ) : (
        <UserPicker client={client} workspaceId={workspaceId} chosen={user} onChoose={choose} />
      )}
      {accessId ? (
        <AccessKeys client={client} accessId={accessId} />
      ) : anyUser ? (
        <Empty>Find a user to see and issue their keys.</Empty>
      ) : null}
    </Page>
  );
}

function AccessKeys({ client, accessId }: { client: Client; accessId: string }) {
  const list = usePaged((page) => listInferenceKeys({ client, path: { accessId }, query: page }), [accessId]);
  const action = useAction();
  const [name, setName] = useState('');
  const [issued, setIssued] = useState<string | undefined>();
  const issue = async () => {
    const res = await action.run('Issuing the key…', () =>
      issueInferenceKey({ client, path: { accessId }, body: name ? { name } : {}, headers: idempotent() }),
    );
    if (res) {
      setIssued(res.data.apiKey);
      setName('');
      list.reload();
    }
  };
  return (
    <>
      <Form
        fold="New key"
        operation="issueInferenceKey"
        title="Issue a key"
        submit="Issue key"
        onSubmit={issue}
        disabled={!!action.working}
      >
        <Input label="Name (optional)" name="keyName" value={name} onInput={(e) => setName(valueOf(e))} />
      </Form>
      <ActionNotes action={action} problem={list.problem} />
      {issued ? <ShownOnce label="The new inference key." secret={issued} onDismiss={() => setIssued(undefined)} /> : null}
      <PagedTable
        list={list}
        caption="Inference keys"
        columns={['Key', 'Enabled', 'Expires', 'Last request', 'Actions']}
        empty="This user has no key. Issue one with New key above and hand it to the user's application."
        row={(k) => (
          <tr>
            <td>
              {k.name || '(unnamed)'} <code>{k.prefix}…</code>
            </td>
            <td>{k.enabled ? 'yes' : 'revoked'}</td>
            <td>{when(k.expiresAt)}</td>
            <td>{when(k.lastRequestAt)}</td>
            <td class="actions">
              {k.enabled ? (
                <ActionButton
                  operation="revokeInferenceKey"
                  action={action}
                  danger
                  confirm={`Revoke ${k.name || k.prefix}? Calls with it are refused from now on.`}
                  label="Revoking…"
                  call={() => revokeInferenceKey({ client, path: { accessId, keyId: k.id } })}
                  onDone={list.reload}
                >
                  Revoke
                </ActionButton>
              ) : null}
            </td>
          </tr>
        )}
      />
    </>
  );
}
