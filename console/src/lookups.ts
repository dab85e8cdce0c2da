/** Names for the ids a page shows: a workspace's connections and plans, the users of accesses, inference keys. */
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  getInferenceKey,
  getWorkspaceAccess,
  listPlans,
  listProviderConnections,
  listWorkspaceUsers,
  type ApiKeyDto,
  type Client,
  type ProviderConnectionDto,
  type WorkspacePlanDto,
} from './api.js';
import { useFirstPage } from './hooks.js';

/** A workspace's provider connections (its first 100), for a select or their names; undefined until read. */
export function useConnections(client: Client, workspaceId: string): ProviderConnectionDto[] | undefined {
  return useFirstPage(() => listProviderConnections({ client, path: { workspaceId }, query: { limit: 100 } }), [workspaceId]);
}

/** A workspace's plans (its first 100; with `status`, only those), for a select or their names; undefined until read. */
export function usePlans(client: Client, workspaceId: string, status?: 'ACTIVE'): WorkspacePlanDto[] | undefined {
  return useFirstPage(
    () => listPlans({ client, path: { workspaceId }, query: { limit: 100, ...(status ? { status } : {}) } }),
    [workspaceId],
  );
}

/** Each item's name by its id. */
export const namesOf = (items: { id: string; name: string }[] | undefined): Record<string, string> =>
  Object.fromEntries((items ?? []).map((item) => [item.id, item.name]));

/**
 * What `lookup` gives for each of `ids`, asked once per id and shown as the answers arrive (one that fails is left
 * out). With `list`, a read that names many at once (a page of a list), several ids wanted are first looked for in
 * it (read once); only those it does not name are read one by one.
 */
function useLookups<T>(ids: string[], lookup: (id: string) => Promise<T>, list?: () => Promise<Record<string, T>>): Record<string, T> {
  const [found, setFound] = useState<Record<string, T>>({});
  const asked = useRef(new Set<string>());
  const listed = useRef<Promise<Record<string, T>> | undefined>(undefined);
  const wanted = [...new Set(ids)].filter((id) => !asked.current.has(id));
  useEffect(() => {
    if (wanted.length === 0) return;
    for (const id of wanted) asked.current.add(id);
    const add = (more: Record<string, T>) => setFound((known) => ({ ...known, ...more }));
    void (async () => {
      if (list && wanted.length > 1) listed.current ??= list().catch(() => ({}));
      const many = (await listed.current) ?? {};
      add(many);
      const answers = await Promise.all(
        wanted
          .filter((id) => !(id in many))
          .map((id) =>
            lookup(id).then(
              (value) => [id, value] as const,
              () => undefined,
            ),
          ),
      );
      add(Object.fromEntries(answers.filter((a) => a !== undefined)));
    })();
  }, [wanted.join(',')]);
  return found;
}

/**
 * The external user ids of a workspace's accesses, for the ids a page shows: the newest 100 users in one read
 * (listWorkspaceUsers), then each access that is not among them once (getWorkspaceAccess).
 */
export function useAccessNames(client: Client, workspaceId: string, accessIds: string[]): Record<string, string> {
  return useLookups(
    accessIds,
    (accessId) => getWorkspaceAccess({ client, path: { accessId } }).then((res) => res.data.externalUserId),
    () =>
      listWorkspaceUsers({ client, path: { workspaceId }, query: { limit: 100 } }).then((page) =>
        Object.fromEntries(page.data.map((user) => [user.access.id, user.externalUserId])),
      ),
  );
}

/** Inference keys by id (getInferenceKey: name, prefix and access; never the plaintext), read once each (no list names them across a workspace). */
export function useInferenceKeys(client: Client, keyIds: string[]): Record<string, ApiKeyDto> {
  return useLookups(keyIds, (keyId) => getInferenceKey({ client, path: { keyId } }).then((res) => res.data));
}
