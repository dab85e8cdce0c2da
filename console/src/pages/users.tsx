import { useEffect, useState } from 'preact/hooks';
import {
  activateWorkspaceAccess,
  changeAccessPlan,
  grantAccessUnits,
  idempotent,
  listWorkspaceUsers,
  provisionWorkspaceUser,
  renewWorkspaceAccess,
  suspendWorkspaceAccess,
  type Client,
  type WorkspacePlanDto,
  type WorkspaceUserDto,
} from '../api.js';
import { ActionButton, ExpandButton, useOpenRow } from '../components/buttons.js';
import { PagedTable } from '../components/lists.js';
import { QuotaBar, QuotaCell } from '../components/quota.js';
import { toInstant, when } from '../format.js';
import { onlySet, useAction, useFields, usePaged, valueOf } from '../hooks.js';
import { namesOf, usePlans } from '../lookups.js';
import {
  ActionNotes,
  Empty,
  ErrorNote,
  useAllowed,
  Folded,
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
  const [mode, setMode] = useState<'renew' | 'plan' | 'units' | undefined>();
  const [units, setUnits] = useState('');
  const [reason, setReason] = useState('');
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
        : mode === 'units'
          ? await action.run('Granting the units…', () =>
              grantAccessUnits({
                client,
                path,
                body: { units: units.trim() as `${bigint}`, ...(reason.trim() ? { reason: reason.trim() } : {}) },
                headers: idempotent(),
              }),
            )
          : await action.run('Changing the plan…', () => changeAccessPlan({ client, path, body: { planId } }));
    if (saved) {
      setUnits('');
      setReason('');
      done();
    }
  };
  const toggle = (m: 'renew' | 'plan' | 'units') => setMode(mode === m ? undefined : m);
  const allowed = useAllowed();
  const OPERATION_OF = { renew: 'renewWorkspaceAccess', plan: 'changeAccessPlan', units: 'grantAccessUnits' } as const;
  const titles = {
    renew: [`Renew ${user.externalUserId}`, 'Renew'],
    plan: [`Change the plan of ${user.externalUserId}`, 'Change plan'],
    units: [`Grant units to ${user.externalUserId}`, 'Grant units'],
  } as const;
  return (
    <div class="access">
      <QuotaBar key={quotaVersion} client={client} accessId={access.id} />
      <div class="row">
        {access.status !== 'ACTIVE' && access.status !== 'REVOKED' ? (
          <ActionButton
            operation="activateWorkspaceAccess"
            action={action}
            label="Activating…"
            call={() => activateWorkspaceAccess({ client, path })}
            onDone={done}
          >
            Activate
          </ActionButton>
        ) : null}
        {access.status === 'ACTIVE' ? (
          <ActionButton
            operation="suspendWorkspaceAccess"
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
        {allowed('renewWorkspaceAccess') ? (
          <button type="button" aria-expanded={mode === 'renew'} onClick={() => toggle('renew')}>
            Renew
          </button>
        ) : null}
        {allowed('changeAccessPlan') ? (
          <button type="button" aria-expanded={mode === 'plan'} onClick={() => toggle('plan')}>
            Change plan
          </button>
        ) : null}
        {access.status !== 'REVOKED' && allowed('grantAccessUnits') ? (
          <button type="button" aria-expanded={mode === 'units'} onClick={() => toggle('units')}>
            Grant units
          </button>
        ) : null}
        <a href={`#/w/${access.workspaceId}/keys/${access.id}`}>Inference keys of {user.externalUserId}</a>
        <a href={`#/w/${access.workspaceId}/invocations/access/${access.id}`}>Invocations of {user.externalUserId}</a>
      </div>
      {mode ? (
        <Form operation={OPERATION_OF[mode]} title={titles[mode][0]} submit={titles[mode][1]} disabled={!!action.working} onSubmit={save}>
          {mode === 'units' ? (
            <>
              <p class="lead">
                Added once to the period running now (until it resets), on every process from the next call; a plan change later in the
                period keeps them whole. The audit log records who granted them and why.
              </p>
              <Input
                label="Units"
                name="grantUnits"
                inputMode="numeric"
                pattern="[1-9][0-9]{0,18}"
                required
                value={units}
                onInput={(e) => setUnits(valueOf(e))}
              />
              <Input label="Reason (optional)" name="grantReason" maxLength={500} value={reason} onInput={(e) => setReason(valueOf(e))} />
            </>
          ) : (
            <Select label="Plan" choices={planChoices(plans)} value={planId} onChange={(e) => setPlanId(valueOf(e))} />
          )}
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

/** The form that provisions a user on a published plan (with an inference key unless unticked). */
function ProvisionUser(props: {
  client: Client;
  workspaceId: string;
  plans: WorkspacePlanDto[] | undefined;
  onProvisioned: (accessId: string, apiKey: string | undefined) => void;
}) {
  const { client, workspaceId, plans } = props;
  const action = useAction();
  const choices = planChoices(plans ?? []);
  const { values: form, bind, put, reset, set } = useFields(NEW_USER);
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
      reset();
      props.onProvisioned(res.data.access.id, res.data.apiKey);
    }
  };
  return (
    <>
      {plans === undefined ? (
        <Working label="Loading plans…" />
      ) : Object.keys(choices).length === 0 ? (
        <Empty>
          No published plan yet: <a href={`#/w/${workspaceId}/plans`}>publish a plan</a> first, then provision users on it.
        </Empty>
      ) : (
        <Form
          operation="provisionWorkspaceUser"
          title="Provision a user"
          submit="Provision user"
          onSubmit={provision}
          disabled={!!action.working}
        >
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
    </>
  );
}

const NEW_USER = { externalUserId: '', email: '', name: '', planId: '', issueInferenceKey: true };
const STATUSES: AccessStatus[] = ['PENDING', 'ACTIVE', 'SUSPENDED', 'EXPIRED', 'REVOKED'];

/** Users, newest first; #/w/<ws>/users/<externalUserId> opens one user (a link from an invocation). */
export function UsersPage({ client, workspace, rest }: PageProps) {
  const workspaceId = workspace.id;
  const [status, setStatus] = useState<AccessStatus | ''>('');
  const linked = rest[0] ? decodeURIComponent(rest[0]) : '';
  // What is searched: an email when it has an @, else an external user id.
  const [found, setFound] = useState(linked);
  const [search, setSearch] = useState(linked);
  const [sort, setSort] = useState<'newest' | 'usage'>('newest');
  useEffect(() => {
    setFound(linked);
    setSearch(linked);
  }, [linked]);
  const byEmail = found.includes('@');
  const list = usePaged(
    (page) =>
      listWorkspaceUsers({
        client,
        path: { workspaceId },
        query: {
          ...page,
          ...onlySet({ status, ...(byEmail ? { email: found } : { externalUserId: found }) }),
          ...(sort === 'usage' ? { sort } : {}),
        },
      }),
    [workspaceId, status, found, sort],
  );
  const plans = usePlans(client, workspaceId);
  const [issued, setIssued] = useState<string | undefined>();
  const rows = useOpenRow();
  // Bumped when an access changes (a top-up, a renewal): the rows read their quota again.
  const [changes, setChanges] = useState(0);
  const filtered = !!(status || found);
  return (
    <Page
      title="Users and accesses"
      lead="An end user of your application, with an access on a plan: its quota, its state and its inference keys."
    >
      <Folded label="New user" operation="provisionWorkspaceUser">
        <ProvisionUser
          client={client}
          workspaceId={workspaceId}
          plans={plans}
          onProvisioned={(accessId, apiKey) => {
            setIssued(apiKey);
            rows.set(accessId);
            list.reload();
          }}
        />
      </Folded>
      {issued ? <ShownOnce label="The user's inference key." secret={issued} onDismiss={() => setIssued(undefined)} /> : null}
      <Toolbar search label="Find users" onSubmit={() => setFound(search.trim())}>
        <Input
          label="External user id or email"
          type="search"
          name="findExternalUserId"
          value={search}
          onInput={(e) => setSearch(valueOf(e))}
        />
        <button type="submit">Find</button>
        <Select
          label="Order"
          name="usersSort"
          choices={{ newest: 'Newest first', usage: 'Most units used this period' }}
          value={sort}
          onChange={(e) => setSort(valueOf(e) as 'newest' | 'usage')}
        />
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
              setFound('');
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
            : "No user yet. Provision one with New user above; your application's backend can do the same through the Admin API."
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
              <QuotaCell key={`${u.access.id}-${u.access.updatedAt}-${changes}`} client={client} accessId={u.access.id} />
            </td>
            <td>{when(u.access.accessStartsAt)}</td>
            <td>
              <ExpandButton rows={rows} id={u.access.id} show={`Manage ${u.externalUserId}`} hide="Close" />
            </td>
          </tr>
        )}
        detail={(u) =>
          rows.is(u.access.id) ? (
            <AccessActions
              client={client}
              user={u}
              plans={plans ?? []}
              onChange={() => {
                setChanges((n) => n + 1);
                list.reload();
              }}
            />
          ) : null
        }
      />
    </Page>
  );
}
