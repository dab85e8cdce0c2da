import { useEffect, useState } from 'preact/hooks';
import {
  activateWorkspaceAccess,
  changeAccessPlan,
  getWorkspaceAccessQuota,
  idempotencyKey,
  listPlans,
  listWorkspaceUsers,
  provisionWorkspaceUser,
  renewWorkspaceAccess,
  suspendWorkspaceAccess,
  type Client,
  type QuotaSnapshotDto,
  type WorkspacePlanDto,
  type WorkspaceUserDto,
} from '../api.js';
import type { PageProps } from '../main.js';
import {
  Empty,
  ErrorNote,
  Field,
  Form,
  formatNumber,
  Pager,
  ShownOnce,
  Status,
  usePaged,
  useAction,
  useRead,
  valueOf,
  when,
  Working,
  ListTable,
} from '../ui.js';

type AccessStatus = 'PENDING' | 'ACTIVE' | 'SUSPENDED' | 'EXPIRED' | 'REVOKED';

/** Granted, consumed, reserved and available units of the access's current period, as a bar. */
function QuotaBar({ client, accessId }: { client: Client; accessId: string }) {
  const [quota, setQuota] = useState<QuotaSnapshotDto | undefined>();
  const action = useAction();
  useRead(async () => (await getWorkspaceAccessQuota({ client, path: { accessId } })).data, setQuota, [accessId], {
    action,
    label: 'Reading the quota…',
  });
  if (!quota) return <ErrorNote problem={action.problem} />;
  const granted = Number(quota.grantedUnits) || 1;
  const pct = (v: string) => `${Math.min(100, (Number(v) / granted) * 100).toFixed(2)}%`;
  return (
    <div class="quota" aria-label="Quota">
      <div
        class="bar"
        role="img"
        aria-label={`${quota.consumedUnits} consumed and ${quota.reservedUnits} reserved of ${quota.grantedUnits} units`}
      >
        <span class="consumed" style={{ width: pct(quota.consumedUnits) }} />
        <span class="reserved" style={{ width: pct(quota.reservedUnits) }} />
      </div>
      <dl class="figures">
        <dt>Granted</dt>
        <dd>{formatNumber(quota.grantedUnits)}</dd>
        <dt>Consumed</dt>
        <dd>{formatNumber(quota.consumedUnits)}</dd>
        <dt>Reserved</dt>
        <dd>{formatNumber(quota.reservedUnits)}</dd>
        <dt>Available</dt>
        <dd>{formatNumber(quota.availableUnits)}</dd>
        <dt>Resets</dt>
        <dd>{when(quota.periodEnd)}</dd>
      </dl>
    </div>
  );
}

/** Consumed of granted units this period, with a badge from 80 % (near the limit) and at 100 % (used up). */
function QuotaCell({ client, accessId }: { client: Client; accessId: string }) {
  const [quota, setQuota] = useState<QuotaSnapshotDto | null | undefined>();
  useRead(
    () =>
      getWorkspaceAccessQuota({ client, path: { accessId } }).then(
        (res) => res.data,
        () => null,
      ),
    setQuota,
    [accessId],
  );
  if (quota === undefined) return <span class="id">…</span>;
  if (quota === null) return <span class="id">—</span>;
  const granted = Number(quota.grantedUnits);
  const used = granted > 0 ? Number(quota.consumedUnits) / granted : 0;
  return (
    <span class="numbers">
      {formatNumber(quota.consumedUnits)} / {formatNumber(quota.grantedUnits)}
      {used >= 1 ? <span class="badge over">used up</span> : used >= 0.8 ? <span class="badge">near limit</span> : null}
    </span>
  );
}

function AccessActions({
  client,
  user,
  plans,
  onChange,
}: {
  client: Client;
  user: WorkspaceUserDto;
  plans: WorkspacePlanDto[];
  onChange: () => void;
}) {
  const access = user.access;
  const action = useAction();
  const [mode, setMode] = useState<'renew' | 'plan' | undefined>();
  const [planId, setPlanId] = useState(access.planId);
  const [periodStart, setPeriodStart] = useState('');
  const [periodEnd, setPeriodEnd] = useState('');
  const [quotaVersion, setQuotaVersion] = useState(0);
  const done = () => {
    setMode(undefined);
    setQuotaVersion((v) => v + 1);
    onChange();
  };
  const run = async (label: string, fn: () => Promise<unknown>) => {
    if (await action.run(label, fn)) done();
  };
  const active = plans.filter((p) => p.status === 'ACTIVE');
  return (
    <div class="access">
      <QuotaBar key={quotaVersion} client={client} accessId={access.id} />
      <div class="row">
        {access.status !== 'ACTIVE' && access.status !== 'REVOKED' ? (
          <button
            type="button"
            onClick={() => void run('Activating…', () => activateWorkspaceAccess({ client, path: { accessId: access.id } }))}
          >
            Activate
          </button>
        ) : null}
        {access.status === 'ACTIVE' ? (
          <button
            type="button"
            class="danger"
            onClick={() => {
              if (!window.confirm(`Suspend ${user.externalUserId}? The gateway refuses their calls until the access is activated again.`))
                return;
              void run('Suspending…', () => suspendWorkspaceAccess({ client, path: { accessId: access.id } }));
            }}
          >
            Suspend access
          </button>
        ) : null}
        <button type="button" aria-expanded={mode === 'renew'} onClick={() => setMode(mode === 'renew' ? undefined : 'renew')}>
          Renew
        </button>
        <button type="button" aria-expanded={mode === 'plan'} onClick={() => setMode(mode === 'plan' ? undefined : 'plan')}>
          Change plan
        </button>
        <a href={`#/w/${access.workspaceId}/keys/${access.id}`}>Inference keys of {user.externalUserId}</a>
        <a href={`#/w/${access.workspaceId}/invocations/access/${access.id}`}>Invocations of {user.externalUserId}</a>
      </div>
      {mode ? (
        <Form
          title={mode === 'renew' ? `Renew ${user.externalUserId}` : `Change the plan of ${user.externalUserId}`}
          submit={mode === 'renew' ? 'Renew' : 'Change plan'}
          disabled={!!action.working}
          onSubmit={() =>
            void (mode === 'renew'
              ? run('Renewing…', () =>
                  renewWorkspaceAccess({
                    client,
                    path: { accessId: access.id },
                    body: { planId, periodStart: new Date(periodStart).toISOString(), periodEnd: new Date(periodEnd).toISOString() },
                  }),
                )
              : run('Changing the plan…', () => changeAccessPlan({ client, path: { accessId: access.id }, body: { planId } })))
          }
        >
          <Field label="Plan">
            <select value={planId} onChange={(e) => setPlanId(valueOf(e))}>
              {active.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </Field>
          {mode === 'renew' ? (
            <>
              <Field label="Period start (your local time)">
                <input type="datetime-local" required value={periodStart} onInput={(e) => setPeriodStart(valueOf(e))} />
              </Field>
              <Field label="Period end (your local time)">
                <input type="datetime-local" required value={periodEnd} onInput={(e) => setPeriodEnd(valueOf(e))} />
              </Field>
            </>
          ) : null}
        </Form>
      ) : null}
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
    </div>
  );
}

/** Users, newest first; #/w/<ws>/users/<externalUserId> opens one user (a link from an invocation). */
export function UsersPage({ client, workspace, rest }: PageProps) {
  const workspaceId = workspace.id;
  const [status, setStatus] = useState<AccessStatus | ''>('');
  const linked = rest[0] ? decodeURIComponent(rest[0]) : '';
  const [externalUserId, setExternalUserId] = useState(linked);
  const [search, setSearch] = useState(linked);
  useEffect(() => {
    setExternalUserId(linked);
    setSearch(linked);
  }, [linked]);
  const list = usePaged(
    (cursor) =>
      listWorkspaceUsers({
        client,
        path: { workspaceId },
        query: { cursor, limit: 20, ...(status ? { status } : {}), ...(externalUserId ? { externalUserId } : {}) },
      }),
    [workspaceId, status, externalUserId],
  );
  const [plans, setPlans] = useState<WorkspacePlanDto[] | undefined>();
  useEffect(() => {
    listPlans({ client, path: { workspaceId }, query: { limit: 100 } })
      .then((page) => setPlans(page.data))
      .catch(() => setPlans([]));
  }, [workspaceId]);
  const action = useAction();
  const active = (plans ?? []).filter((p) => p.status === 'ACTIVE');
  const [form, setForm] = useState({ externalUserId: '', email: '', name: '', planId: '', issueInferenceKey: true });
  const [issued, setIssued] = useState<string | undefined>();
  const [open, setOpen] = useState<string | undefined>();
  const set = (field: 'externalUserId' | 'email' | 'name' | 'planId') => (e: Event) => setForm({ ...form, [field]: valueOf(e) });
  const provision = async () => {
    const planId = form.planId || active[0]?.id;
    if (!planId) return;
    const res = await action.run('Provisioning…', () =>
      provisionWorkspaceUser({
        client,
        path: { workspaceId },
        body: {
          externalUserId: form.externalUserId,
          email: form.email,
          planId,
          issueInferenceKey: form.issueInferenceKey,
          ...(form.name ? { name: form.name } : {}),
        },
        headers: { 'Idempotency-Key': idempotencyKey() },
      }),
    );
    if (res) {
      setIssued(res.data.apiKey);
      setForm({ externalUserId: '', email: '', name: '', planId: '', issueInferenceKey: true });
      setOpen(res.data.access.id);
      list.reload();
    }
  };
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Users and accesses</h1>
      <p class="lead">An end user of your application, with an access on a plan: its quota, its state and its inference keys.</p>
      {plans === undefined ? (
        <Working label="Loading plans…" />
      ) : active.length === 0 ? (
        <Empty>
          No published plan yet: <a href={`#/w/${workspaceId}/plans`}>publish a plan</a> first, then provision users on it.
        </Empty>
      ) : (
        <Form title="Provision a user" submit="Provision user" onSubmit={provision} disabled={!!action.working}>
          <div class="grid">
            <Field label="External user id" hint="Your application's id for the user">
              <input name="externalUserId" required value={form.externalUserId} onInput={set('externalUserId')} />
            </Field>
            <Field label="Email">
              <input name="email" type="email" required value={form.email} onInput={set('email')} />
            </Field>
            <Field label="Name (optional)">
              <input name="userName" value={form.name} onInput={set('name')} />
            </Field>
            <Field label="Plan">
              <select name="planId" value={form.planId || active[0]?.id} onChange={set('planId')}>
                {active.map((p) => (
                  <option key={p.id} value={p.id}>
                    {p.name}
                  </option>
                ))}
              </select>
            </Field>
          </div>
          <label class="check">
            <input
              type="checkbox"
              checked={form.issueInferenceKey}
              onChange={(e) => setForm({ ...form, issueInferenceKey: e.currentTarget.checked })}
            />{' '}
            Issue an inference key
          </label>
        </Form>
      )}
      <Working label={action.working} />
      <ErrorNote problem={action.problem} />
      {issued ? <ShownOnce label="The user's inference key." secret={issued} onDismiss={() => setIssued(undefined)} /> : null}
      <form
        class="toolbar"
        role="search"
        aria-label="Find users"
        onSubmit={(e) => {
          e.preventDefault();
          setExternalUserId(search.trim());
        }}
      >
        <Field label="External user id">
          <input type="search" name="findExternalUserId" value={search} onInput={(e) => setSearch(valueOf(e))} />
        </Field>
        <button type="submit">Find</button>
        <Field label="Status">
          <select value={status} onChange={(e) => setStatus(valueOf(e) as AccessStatus | '')}>
            <option value="">All</option>
            {['PENDING', 'ACTIVE', 'SUSPENDED', 'EXPIRED', 'REVOKED'].map((s) => (
              <option key={s} value={s}>
                {s.toLowerCase()}
              </option>
            ))}
          </select>
        </Field>
        {status || externalUserId ? (
          <button
            type="button"
            onClick={() => {
              setStatus('');
              setExternalUserId('');
              setSearch('');
            }}
          >
            Clear the filters
          </button>
        ) : null}
      </form>
      <Working label={list.loading && !list.items ? 'Loading users…' : undefined} />
      <ErrorNote problem={list.problem} />
      {list.items?.length === 0 ? (
        status || externalUserId ? (
          <Empty>No user matches these filters.</Empty>
        ) : (
          <Empty>No user yet. Provision one above; your application's backend can do the same through the Admin API.</Empty>
        )
      ) : (
        <ListTable caption="Users" columns={['User', 'Plan', 'Access', 'Consumed / granted', 'Since', 'Details']}>
          {list.items?.map((u) => (
            <>
              <tr key={u.access.id}>
                <td>
                  {u.externalUserId} <span class="id">{u.email}</span>
                  <div class="id">{u.access.id}</div>
                </td>
                <td>
                  <a href={`#/w/${workspaceId}/plans`}>{plans?.find((p) => p.id === u.access.planId)?.name ?? u.access.planId}</a>
                </td>
                <td>
                  <Status value={u.access.status} />
                </td>
                <td>
                  <QuotaCell key={`${u.access.id}-${u.access.updatedAt}`} client={client} accessId={u.access.id} />
                </td>
                <td>{when(u.access.accessStartsAt)}</td>
                <td>
                  <button
                    type="button"
                    aria-expanded={open === u.access.id}
                    onClick={() => setOpen(open === u.access.id ? undefined : u.access.id)}
                  >
                    {open === u.access.id ? 'Close' : `Manage ${u.externalUserId}`}
                  </button>
                </td>
              </tr>
              {open === u.access.id ? (
                <tr key={`${u.access.id}-detail`}>
                  <td colSpan={6}>
                    <AccessActions client={client} user={u} plans={plans ?? []} onChange={list.reload} />
                  </td>
                </tr>
              ) : null}
            </>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </section>
  );
}
