import { useEffect, useState } from 'preact/hooks';
import {
  activateWorkspaceAccess,
  changeAccessPlan,
  getWorkspaceAccessQuota,
  idempotent,
  listWorkspaceUsers,
  provisionWorkspaceUser,
  renewWorkspaceAccess,
  suspendWorkspaceAccess,
  type Client,
  type QuotaSnapshotDto,
  type WorkspacePlanDto,
  type WorkspaceUserDto,
} from '../api.js';
import { ActionButton, ExpandButton, useOpenRow } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { formatNumber, toInstant, when } from '../format.js';
import { onlySet, useAction, useFields, usePaged, useRead, valueOf } from '../hooks.js';
import { namesOf, usePlans } from '../lookups.js';
import {
  ActionNotes,
  Empty,
  ErrorNote,
  Figures,
  Form,
  Input,
  LocalTimeInput,
  Page,
  Select,
  ShownOnce,
  Status,
  statusChoices,
  Toolbar,
  Working,
  type PageProps,
} from '../ui.js';

type AccessStatus = 'PENDING' | 'ACTIVE' | 'SUSPENDED' | 'EXPIRED' | 'REVOKED';

/** The quota's figures in units: each term and its field. */
const UNITS = [
  ['Granted', 'grantedUnits'],
  ['Consumed', 'consumedUnits'],
  ['Reserved', 'reservedUnits'],
  ['Available', 'availableUnits'],
] as const;

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
      <Figures items={[...UNITS.map(([term, field]) => [term, formatNumber(quota[field])] as const), ['Resets', when(quota.periodEnd)]]} />
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

/** The published plans by name: those a user can be put on. */
const planChoices = (plans: WorkspacePlanDto[]) => namesOf(plans.filter((p) => p.status === 'ACTIVE'));

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
  const path = { accessId: access.id };
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
  const save = async () => {
    const saved =
      mode === 'renew'
        ? await action.run('Renewing…', () =>
            renewWorkspaceAccess({ client, path, body: { planId, periodStart: toInstant(periodStart), periodEnd: toInstant(periodEnd) } }),
          )
        : await action.run('Changing the plan…', () => changeAccessPlan({ client, path, body: { planId } }));
    if (saved) done();
  };
  return (
    <div class="access">
      <QuotaBar key={quotaVersion} client={client} accessId={access.id} />
      <div class="row">
        {access.status !== 'ACTIVE' && access.status !== 'REVOKED' ? (
          <ActionButton action={action} label="Activating…" call={() => activateWorkspaceAccess({ client, path })} onDone={done}>
            Activate
          </ActionButton>
        ) : null}
        {access.status === 'ACTIVE' ? (
          <ActionButton
            action={action}
            danger
            confirm={`Suspend ${user.externalUserId}? The gateway refuses their calls until the access is activated again.`}
            label="Suspending…"
            call={() => suspendWorkspaceAccess({ client, path })}
            onDone={done}
          >
            Suspend access
          </ActionButton>
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
          onSubmit={save}
        >
          <Select label="Plan" choices={planChoices(plans)} value={planId} onChange={(e) => setPlanId(valueOf(e))} />
          {mode === 'renew' ? (
            <>
              <LocalTimeInput label="Period start" required value={periodStart} onInput={(e) => setPeriodStart(valueOf(e))} />
              <LocalTimeInput label="Period end" required value={periodEnd} onInput={(e) => setPeriodEnd(valueOf(e))} />
            </>
          ) : null}
        </Form>
      ) : null}
      <ActionNotes action={action} />
    </div>
  );
}

const NEW_USER = { externalUserId: '', email: '', name: '', planId: '', issueInferenceKey: true };
const STATUSES: AccessStatus[] = ['PENDING', 'ACTIVE', 'SUSPENDED', 'EXPIRED', 'REVOKED'];

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
    (page) =>
      listWorkspaceUsers({
        client,
        path: { workspaceId },
        query: { ...page, ...onlySet({ status, externalUserId }) },
      }),
    [workspaceId, status, externalUserId],
  );
  const plans = usePlans(client, workspaceId);
  const action = useAction();
  const choices = planChoices(plans ?? []);
  const { values: form, bind, put, reset, set } = useFields(NEW_USER);
  const [issued, setIssued] = useState<string | undefined>();
  const rows = useOpenRow();
  const provision = async () => {
    const planId = form.planId || Object.keys(choices)[0];
    if (!planId) return;
    const body = {
      externalUserId: form.externalUserId,
      email: form.email,
      planId,
      issueInferenceKey: form.issueInferenceKey,
      ...(form.name ? { name: form.name } : {}),
    };
    const res = await action.run('Provisioning…', () =>
      provisionWorkspaceUser({ client, path: { workspaceId }, body, headers: idempotent() }),
    );
    if (res) {
      setIssued(res.data.apiKey);
      reset();
      rows.set(res.data.access.id);
      list.reload();
    }
  };
  const filtered = !!(status || externalUserId);
  return (
    <Page
      title="Users and accesses"
      lead="An end user of your application, with an access on a plan: its quota, its state and its inference keys."
    >
      {plans === undefined ? (
        <Working label="Loading plans…" />
      ) : Object.keys(choices).length === 0 ? (
        <Empty>
          No published plan yet: <a href={`#/w/${workspaceId}/plans`}>publish a plan</a> first, then provision users on it.
        </Empty>
      ) : (
        <Form title="Provision a user" submit="Provision user" onSubmit={provision} disabled={!!action.working}>
          <div class="grid">
            <Input
              label="External user id"
              hint="Your application's id for the user"
              name="externalUserId"
              required
              {...bind('externalUserId')}
            />
            <Input label="Email" name="email" type="email" required {...bind('email')} />
            <Input label="Name (optional)" name="userName" {...bind('name')} />
            <Select label="Plan" name="planId" choices={choices} value={form.planId || Object.keys(choices)[0]} onChange={set('planId')} />
          </div>
          <label class="check">
            <input type="checkbox" checked={form.issueInferenceKey} onChange={(e) => put({ issueInferenceKey: e.currentTarget.checked })} />{' '}
            Issue an inference key
          </label>
        </Form>
      )}
      <ActionNotes action={action} />
      {issued ? <ShownOnce label="The user's inference key." secret={issued} onDismiss={() => setIssued(undefined)} /> : null}
      <Toolbar search label="Find users" onSubmit={() => setExternalUserId(search.trim())}>
        <Input label="External user id" type="search" name="findExternalUserId" value={search} onInput={(e) => setSearch(valueOf(e))} />
        <button type="submit">Find</button>
        <Select
          label="Status"
          choices={statusChoices(STATUSES, 'All')}
          value={status}
          onChange={(e) => setStatus(valueOf(e) as AccessStatus | '')}
        />
        {filtered ? (
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
      </Toolbar>
      <Working label={list.loading && !list.items ? 'Loading users…' : undefined} />
      <ErrorNote problem={list.problem} />
      <PagedTable
        list={list}
        caption="Users"
        columns={['User', 'Plan', 'Access', 'Consumed / granted', 'Since', 'Details']}
        empty={
          filtered
            ? 'No user matches these filters.'
            : "No user yet. Provision one above; your application's backend can do the same through the Admin API."
        }
        keyOf={(u) => u.access.id}
        row={(u) => (
          <tr>
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
              <ExpandButton rows={rows} id={u.access.id} show={`Manage ${u.externalUserId}`} hide="Close" />
            </td>
          </tr>
        )}
        detail={(u) =>
          rows.is(u.access.id) ? <AccessActions client={client} user={u} plans={plans ?? []} onChange={list.reload} /> : null
        }
      />
    </Page>
  );
}
