import { useEffect, useState } from 'preact/hooks';
import {
  getWorkspaceAccess,
  idempotencyKey,
  issueInferenceKey,
  listInferenceKeys,
  listWorkspaceUsers,
  revokeInferenceKey,
  type ApiKeyDto,
  type WorkspaceUserDto,
} from '../api.js';
import type { PageProps } from '../main.js';
import {
  Empty,
  ErrorNote,
  Field,
  Form,
  Pager,
  ShownOnce,
  usePaged,
  useAction,
  useRead,
  UserPicker,
  valueOf,
  when,
  Working,
  ListTable,
} from '../ui.js';

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
    <section aria-labelledby="page-title">
      <h1 id="page-title">Inference keys</h1>
      <p class="lead">
        The keys an end user calls the gateway with. A key's plaintext is shown once, when it is issued; revoking one leaves the plan and
        quota as they are.
      </p>
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
    </section>
  );
}

function AccessKeys({ client, accessId }: { client: PageProps['client']; accessId: string }) {
  const list = usePaged((cursor) => listInferenceKeys({ client, path: { accessId }, query: { cursor, limit: 20 } }), [accessId]);
  const action = useAction();
  const [name, setName] = useState('');
  const [issued, setIssued] = useState<string | undefined>();
  const issue = async () => {
    const res = await action.run('Issuing the key…', () =>
      issueInferenceKey({ client, path: { accessId }, body: name ? { name } : {}, headers: { 'Idempotency-Key': idempotencyKey() } }),
    );
    if (res) {
      setIssued(res.data.apiKey);
      setName('');
      list.reload();
    }
  };
  const revoke = async (key: ApiKeyDto) => {
    if (!window.confirm(`Revoke ${key.name || key.prefix}? Calls with it are refused from now on.`)) return;
    if (await action.run('Revoking…', () => revokeInferenceKey({ client, path: { accessId, keyId: key.id } }))) list.reload();
  };
  return (
    <>
      <Form title="Issue a key" submit="Issue key" onSubmit={issue} disabled={!!action.working}>
        <Field label="Name (optional)">
          <input name="keyName" value={name} onInput={(e) => setName(valueOf(e))} />
        </Field>
      </Form>
      <Working label={action.working} />
      <ErrorNote problem={action.problem ?? list.problem} />
      {issued ? <ShownOnce label="The new inference key." secret={issued} onDismiss={() => setIssued(undefined)} /> : null}
      {list.items?.length === 0 ? (
        <Empty>This user has no key. Issue one above and hand it to the user's application.</Empty>
      ) : (
        <ListTable caption="Inference keys" columns={['Key', 'Enabled', 'Expires', 'Last request', 'Actions']}>
          {list.items?.map((k) => (
            <tr key={k.id}>
              <td>
                {k.name || '(unnamed)'} <code>{k.prefix}…</code>
              </td>
              <td>{k.enabled ? 'yes' : 'revoked'}</td>
              <td>{when(k.expiresAt)}</td>
              <td>{when(k.lastRequestAt)}</td>
              <td class="actions">
                {k.enabled ? (
                  <button type="button" class="danger" onClick={() => void revoke(k)}>
                    Revoke
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </>
  );
}
