import { useState } from 'preact/hooks';
import {
  archiveProviderConnection,
  createProviderConnection,
  idempotent,
  listProviderConnections,
  rotateProviderSecret,
  testProviderConnection,
  updateProviderConnection,
  verifyProviderConnection,
  type ProviderCheckResultDto,
  type Client,
  type ProviderConnectionDto,
} from '../api.js';
import { ActionButton, ArchiveButton, ExpandButton, useOpenRow } from '../components/buttons.js';
import {
  ConnectionFields,
  connectionOf,
  EditConnection,
  NEW_CONNECTION,
  RotationAwsFields,
  testOf,
} from '../components/connection-form.js';
import { HealthCell } from '../components/connection-health.js';
import { PagedTable } from '../components/lists.js';
import { SecretForm } from '../components/secret-form.js';
import { when } from '../format.js';
import { useAction, useFields, usePaged, type Action } from '../hooks.js';
import { ActionNotes, ErrorNote, Form, Notice, Page, Status, type PageProps } from '../ui.js';

/** A test's or a verification's outcome in a line: "Test: ok (HTTP 200) in 12 ms". */
const outcomeOf = (what: string, r: ProviderCheckResultDto) =>
  `${what}: ${r.outcome}${r.httpStatus ? ` (HTTP ${r.httpStatus})` : ''} in ${r.latencyMs} ms`;

/** A connection's buttons: verify it (its outcome said), rotate its key, suspend or resume it, archive it. */
function ConnectionActions(props: {
  client: Client;
  connection: ProviderConnectionDto;
  action: Action;
  onRotate: () => void;
  onOutcome: (outcome: string) => void;
  onChange: () => void;
  rows: ReturnType<typeof useOpenRow>;
}) {
  const { client, connection: c, action, onChange } = props;
  const path = { providerConnectionId: c.id };
  // Suspends an active connection, resumes a suspended one.
  const status = c.status === 'ACTIVE' ? 'SUSPENDED' : 'ACTIVE';
  return (
    <>
      <ActionButton
        operation="verifyProviderConnection"
        action={action}
        label={`Verifying ${c.name}…`}
        call={() => verifyProviderConnection({ client, path })}
        onDone={(res) => {
          props.onOutcome(outcomeOf(`Verify ${c.name}`, res.data));
          onChange();
        }}
      >
        Verify
      </ActionButton>
      <ExpandButton rows={props.rows} id={c.id} show="Edit" hide="Close" />
      <button type="button" onClick={props.onRotate}>
        Rotate key
      </button>
      <ActionButton
        operation="updateProviderConnection"
        action={action}
        label={status === 'SUSPENDED' ? 'Suspending…' : 'Resuming…'}
        call={() => updateProviderConnection({ client, path, body: { status } })}
        onDone={onChange}
      >
        {status === 'SUSPENDED' ? 'Suspend' : 'Resume'}
      </ActionButton>
      <ArchiveButton
        operation="archiveProviderConnection"
        action={action}
        name={c.name}
        stops="Gateway calls to it stop for good."
        call={() => archiveProviderConnection({ client, path })}
        onDone={onChange}
      />
    </>
  );
}

/** When it was last verified, and a Verify that failed since, in red. */
function Verified({ connection: c }: { connection: ProviderConnectionDto }) {
  const failed = c.lastVerify && c.lastVerify.outcome !== 'reachable' ? c.lastVerify : undefined;
  return (
    <>
      {failed ? (
        <>
          <span class="status status-failed" data-testid="verify-failed">
            failed
          </span>
          <div class="id">
            {failed.outcome}, {when(failed.at)}
          </div>
        </>
      ) : (
        when(c.lastVerifiedAt)
      )}
    </>
  );
}

export function ConnectionsPage({ client, workspace }: PageProps) {
  const workspaceId = workspace.id;
  const list = usePaged((page) => listProviderConnections({ client, path: { workspaceId }, query: page }), [workspaceId]);
  const action = useAction();
  const fields = useFields(NEW_CONNECTION);
  const { values: form, reset } = fields;
  const [outcome, setOutcome] = useState<string | undefined>();
  /** The connection whose key is being rotated, and a bedrock one's credentials beside the key. */
  const [rotating, setRotating] = useState<ProviderConnectionDto | undefined>();
  const [rotationAws, setRotationAws] = useState({ awsRegion: '', awsAccessKeyId: '' });
  const rows = useOpenRow();

  const test = async () => {
    setOutcome(undefined);
    const res = await action.run('Testing the upstream (a call to its models endpoint)…', () =>
      testProviderConnection({ client, path: { workspaceId }, body: testOf(form) }),
    );
    if (res) setOutcome(outcomeOf('Test', res.data));
  };
  const create = async () => {
    const res = await action.run('Creating the connection…', () =>
      createProviderConnection({ client, path: { workspaceId }, body: connectionOf(form), headers: idempotent() }),
    );
    if (res) {
      reset();
      setOutcome(`Created ${res.data.name}: gateway base URL ${res.data.gatewayBaseUrl}`);
      list.reload();
    }
  };
  return (
    <Page
      title="Provider connections"
      lead="An upstream provider (its base URL and API key, stored encrypted). Callers reach it at the connection's gateway base URL."
    >
      <Form
        fold="New connection"
        operation="createProviderConnection"
        title="Create a connection"
        submit="Create connection"
        onSubmit={create}
        disabled={!!action.working}
      >
        <ConnectionFields form={fields} />
        <button type="button" onClick={() => void test()} disabled={!!action.working || !form.baseUrl || !form.apiKey}>
          Test before saving
        </button>
      </Form>
      <ActionNotes action={action} />
      <Notice class="notice" text={outcome} />
      {rotating ? (
        <SecretForm
          operation="rotateProviderSecret"
          key={rotating.id}
          action={action}
          title={`Rotate the key of ${rotating.name}`}
          submit="Rotate key"
          label="New provider API key"
          working="Rotating the key…"
          save={(apiKey) =>
            rotateProviderSecret({
              client,
              path: { providerConnectionId: rotating.id },
              body: {
                apiKey,
                ...(rotating.protocolProfile === 'bedrock' && rotationAws.awsRegion.trim()
                  ? { awsRegion: rotationAws.awsRegion.trim() }
                  : {}),
                ...(rotating.protocolProfile === 'bedrock' && rotationAws.awsAccessKeyId.trim()
                  ? { awsAccessKeyId: rotationAws.awsAccessKeyId.trim() }
                  : {}),
              },
            })
          }
          onDone={(res) => {
            setRotating(undefined);
            setRotationAws({ awsRegion: '', awsAccessKeyId: '' });
            setOutcome(`Key rotated: now ${res.data.secretPreview}`);
            list.reload();
          }}
        >
          {rotating.protocolProfile === 'bedrock' ? (
            <RotationAwsFields values={rotationAws} onInput={(field, value) => setRotationAws({ ...rotationAws, [field]: value })} />
          ) : null}
          <button type="button" onClick={() => setRotating(undefined)}>
            Cancel
          </button>
        </SecretForm>
      ) : null}
      <ErrorNote problem={list.problem} />
      <PagedTable
        list={list}
        caption="Provider connections"
        columns={['Name', 'Status', 'Health', 'Gateway base URL', 'Key', 'Verified', 'Actions']}
        empty="No provider connection yet. Create one with your provider's base URL and key (New connection); then make a plan in Plans and strategies."
        row={(c) => (
          <tr>
            <td>
              {c.name}
              <div class="id">
                {c.protocolProfile} → {c.baseUrl}
              </div>
            </td>
            <td>
              <Status value={c.status} />
            </td>
            <td>{c.status !== 'ARCHIVED' ? <HealthCell client={client} connectionId={c.id} version={c.lastVerify?.at ?? ''} /> : '—'}</td>
            <td>
              <code>{c.gatewayBaseUrl}</code>
            </td>
            <td>
              <code>{c.secretPreview}</code>
            </td>
            <td>
              <Verified connection={c} />
            </td>
            <td class="actions">
              {c.status !== 'ARCHIVED' ? (
                <ConnectionActions
                  client={client}
                  connection={c}
                  action={action}
                  onRotate={() => setRotating(c)}
                  onOutcome={setOutcome}
                  onChange={list.reload}
                  rows={rows}
                />
              ) : null}
            </td>
          </tr>
        )}
        detail={(c) =>
          rows.is(c.id) ? (
            <EditConnection
              key={`${c.id}-${c.updatedAt}`}
              client={client}
              connection={c}
              onDone={() => {
                rows.set(undefined);
                list.reload();
              }}
            />
          ) : null
        }
      />
    </Page>
  );
}
