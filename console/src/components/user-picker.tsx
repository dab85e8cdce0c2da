import { useEffect, useState } from 'preact/hooks';
import { listWorkspaceUsers, type Client, type WorkspaceUserDto } from '../api.js';
import { useAction, useFollowing, valueOf } from '../hooks.js';
import { ErrorNote, Field, Status, Toolbar } from '../ui.js';

/**
 * A user chosen by external id, however many users the workspace has: the id typed is looked up with the
 * list's `externalUserId` filter; the newest users are offered as suggestions as it is typed.
 */
export function UserPicker(props: {
  client: Client;
  workspaceId: string;
  chosen: WorkspaceUserDto | undefined;
  onChoose: (user: WorkspaceUserDto) => void;
  label?: string;
}) {
  const [query, setQuery] = useFollowing(props.chosen?.externalUserId ?? '');
  const [recent, setRecent] = useState<WorkspaceUserDto[]>([]);
  const action = useAction();
  const listId = `users-${props.workspaceId}-${props.label ?? 'user'}`.replace(/\W/g, '-');
  useEffect(() => {
    listWorkspaceUsers({ client: props.client, path: { workspaceId: props.workspaceId }, query: { limit: 20 } }).then(
      (page) => setRecent(page.data),
      () => setRecent([]),
    );
  }, [props.workspaceId]);
  const find = async () => {
    const externalUserId = query.trim();
    if (!externalUserId) return;
    const page = await action.run('Finding the user…', () =>
      listWorkspaceUsers({ client: props.client, path: { workspaceId: props.workspaceId }, query: { externalUserId, limit: 1 } }),
    );
    if (!page) return;
    const user = page.data[0];
    if (user) props.onChoose(user);
    else action.setProblem({ message: `No user with the external id ${externalUserId} in this workspace.` });
  };
  return (
    <Toolbar search label={`Find a ${props.label ?? 'user'}`} onSubmit={() => void find()}>
      <Field label={props.label ?? 'User'} hint="The user's external id (your application's id for them)">
        <input type="search" name="externalUserId" list={listId} required value={query} onInput={(e) => setQuery(valueOf(e))} />
      </Field>
      <datalist id={listId}>
        {recent.map((u) => (
          <option key={u.access.id} value={u.externalUserId}>
            {u.email}
          </option>
        ))}
      </datalist>
      <button type="submit" disabled={!!action.working}>
        Find
      </button>
      {props.chosen ? (
        <span role="status">
          {props.chosen.externalUserId} · {props.chosen.email} · <Status value={props.chosen.access.status} />
        </span>
      ) : null}
      <ErrorNote problem={action.problem} />
    </Toolbar>
  );
}
