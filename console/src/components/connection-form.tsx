/**
 * A provider connection's fields by profile: each profile's base URL and key as its provider names them, a bedrock
 * connection's region and credentials, and the settings every profile has (timeout, whether the upstream enforces
 * the output cap). Used to create a connection, to edit one (only what changed is sent) and to rotate its key.
 */
import { useState } from 'preact/hooks';
import {
  updateProviderConnection,
  type Client,
  type CreateProviderConnectionDtoWritable,
  type ProtocolProfile,
  type ProviderConnectionDto,
  type UpdateProviderConnectionDtoWritable,
} from '../api.js';
import { useAction, type Fields } from '../hooks.js';
import { ActionNotes, Field, Form, Input, SecretInput, Select } from '../ui.js';

/** What each profile asks for: its name, an example base URL, what its key is, and a word on what is special. */
const PROFILES: Record<ProtocolProfile, { name: string; baseUrl: string; key: string; note?: string }> = {
  openai: { name: 'OpenAI (and compatible servers)', baseUrl: 'https://api.openai.com', key: 'The API key' },
  anthropic: { name: 'Anthropic', baseUrl: 'https://api.anthropic.com', key: 'The API key' },
  'azure-openai': {
    name: 'Azure OpenAI',
    baseUrl: 'https://my-resource.openai.azure.com',
    key: "The resource's api-key",
    note: 'The model a caller names is the deployment: map other model names to deployments with a route (its target’s model map).',
  },
  gemini: { name: 'Google Gemini', baseUrl: 'https://generativelanguage.googleapis.com', key: 'The API key (sent as x-goog-api-key)' },
  bedrock: {
    name: 'Amazon Bedrock',
    baseUrl: 'https://bedrock-runtime.us-east-1.amazonaws.com',
    key: 'A Bedrock API key, or the secret access key of the access key id below',
    note: 'With an access key id, calls are signed with SigV4; without, the key is a Bedrock API key.',
  },
};

/** A new connection as the form starts. */
export const NEW_CONNECTION = {
  name: '',
  protocolProfile: 'openai' as ProtocolProfile,
  baseUrl: '',
  apiKey: '',
  awsRegion: '',
  awsAccessKeyId: '',
  awsSessionToken: '',
  upstreamTimeoutMs: '',
  enforcesOutputCap: true,
};
export type ConnectionForm = typeof NEW_CONNECTION;

/** A bedrock connection's credentials, those given (others are not sent). */
function awsOf(form: Pick<ConnectionForm, 'awsRegion' | 'awsAccessKeyId' | 'awsSessionToken'>) {
  return {
    ...(form.awsRegion.trim() ? { awsRegion: form.awsRegion.trim() } : {}),
    ...(form.awsAccessKeyId.trim() ? { awsAccessKeyId: form.awsAccessKeyId.trim() } : {}),
    ...(form.awsSessionToken ? { awsSessionToken: form.awsSessionToken } : {}),
  };
}

/** The connection the form says, as createProviderConnection takes it. */
export function connectionOf(form: ConnectionForm): CreateProviderConnectionDtoWritable {
  return {
    name: form.name.trim(),
    protocolProfile: form.protocolProfile,
    baseUrl: form.baseUrl.trim(),
    apiKey: form.apiKey,
    ...(form.protocolProfile === 'bedrock' ? awsOf(form) : {}),
    ...(form.upstreamTimeoutMs.trim() ? { upstreamTimeoutMs: Number(form.upstreamTimeoutMs) } : {}),
    enforcesOutputCap: form.enforcesOutputCap,
  };
}

/** What a test of the form's upstream sends: its profile, base URL and credentials. */
export const testOf = (form: ConnectionForm) => ({
  protocolProfile: form.protocolProfile,
  baseUrl: form.baseUrl.trim(),
  apiKey: form.apiKey,
  ...(form.protocolProfile === 'bedrock' ? awsOf(form) : {}),
});

/** A bedrock connection's region and access key fields (the session token is a secret). */
function AwsFields(props: {
  values: Pick<ConnectionForm, 'awsRegion' | 'awsAccessKeyId'>;
  onInput: (field: 'awsRegion' | 'awsAccessKeyId', value: string) => void;
  regionRequired: boolean;
}) {
  return (
    <div class="grid">
      <Input
        label="AWS region"
        hint={props.regionRequired ? 'us-east-1' : 'Empty: the region stored stays'}
        name="awsRegion"
        pattern="[a-z0-9\-]+"
        required={props.regionRequired}
        value={props.values.awsRegion}
        onInput={(e) => props.onInput('awsRegion', e.currentTarget.value)}
      />
      <Input
        label="AWS access key id (optional)"
        hint="For SigV4: the key above is then its secret access key"
        name="awsAccessKeyId"
        pattern="[A-Z0-9]{16,128}"
        autoComplete="off"
        value={props.values.awsAccessKeyId}
        onInput={(e) => props.onInput('awsAccessKeyId', e.currentTarget.value)}
      />
    </div>
  );
}

/** The create form's fields: profile first, then what that profile needs. */
export function ConnectionFields({ form }: { form: Fields<ConnectionForm> }) {
  const v = form.values;
  const profile = PROFILES[v.protocolProfile];
  return (
    <>
      <div class="grid">
        <Input label="Name" name="connectionName" required {...form.bind('name')} />
        <Select
          label="Protocol"
          name="protocolProfile"
          choices={Object.fromEntries(Object.entries(PROFILES).map(([k, p]) => [k, p.name]))}
          {...form.bindChange('protocolProfile')}
        />
      </div>
      {profile.note ? <p class="lead">{profile.note}</p> : null}
      <Input
        label="Upstream base URL"
        hint={`For example ${profile.baseUrl}`}
        name="baseUrl"
        type="url"
        required
        {...form.bind('baseUrl')}
      />
      <SecretInput
        label="Provider API key"
        hint={`${profile.key}. Write-only: only a preview is shown afterwards.`}
        name="providerApiKey"
        {...form.bind('apiKey')}
      />
      {v.protocolProfile === 'bedrock' ? (
        <>
          <AwsFields values={v} regionRequired onInput={(field, value) => form.put({ [field]: value })} />
          {v.awsAccessKeyId ? (
            <Field label="AWS session token (optional)" hint="A temporary credential's token">
              <input type="password" autoComplete="off" name="awsSessionToken" {...form.bind('awsSessionToken')} />
            </Field>
          ) : null}
        </>
      ) : null}
      <SharedSettings
        timeout={v.upstreamTimeoutMs}
        enforces={v.enforcesOutputCap}
        onTimeout={(upstreamTimeoutMs) => form.put({ upstreamTimeoutMs })}
        onEnforces={(enforcesOutputCap) => form.put({ enforcesOutputCap })}
      />
    </>
  );
}

/** What every profile has: the upstream timeout, and whether the upstream keeps to the output cap it is sent. */
function SharedSettings(props: { timeout: string; enforces: boolean; onTimeout: (v: string) => void; onEnforces: (v: boolean) => void }) {
  return (
    <>
      <Input
        label="Upstream timeout (ms)"
        hint="Headers and the gaps between bytes; empty: the deployment's default"
        name="upstreamTimeoutMs"
        type="number"
        min={1000}
        max={600000}
        value={props.timeout}
        onInput={(e) => props.onTimeout(e.currentTarget.value)}
      />
      <label class="check">
        <input
          type="checkbox"
          name="enforcesOutputCap"
          checked={props.enforces}
          onChange={(e) => props.onEnforces(e.currentTarget.checked)}
        />
        The upstream keeps to the output cap it is sent (untick for a server that may answer past max_tokens: calls are then admitted at the
        plan&apos;s cap)
      </label>
    </>
  );
}

/** A bedrock connection's credentials for a rotation, beside the new key (region: empty keeps the one stored). */
export function RotationAwsFields(props: {
  values: { awsRegion: string; awsAccessKeyId: string };
  onInput: (field: 'awsRegion' | 'awsAccessKeyId', value: string) => void;
}) {
  return <AwsFields values={props.values} regionRequired={false} onInput={props.onInput} />;
}

/**
 * Edits a connection: its name, base URL, timeout and output-cap setting, and a bedrock connection's region. Only
 * what changed is sent (updateProviderConnection changes the fields given); the key is changed by a rotation.
 */
export function EditConnection({
  client,
  connection: c,
  onDone,
}: {
  client: Client;
  connection: ProviderConnectionDto;
  onDone: () => void;
}) {
  const action = useAction();
  const [name, setName] = useState(c.name);
  const [baseUrl, setBaseUrl] = useState(c.baseUrl);
  const [timeout, setTimeoutMs] = useState(c.upstreamTimeoutMs === undefined ? '' : String(c.upstreamTimeoutMs));
  const [enforces, setEnforces] = useState(c.enforcesOutputCap);
  const [awsRegion, setAwsRegion] = useState('');
  const save = async () => {
    const was = c.upstreamTimeoutMs === undefined ? '' : String(c.upstreamTimeoutMs);
    const body: UpdateProviderConnectionDtoWritable = {
      ...(name.trim() !== c.name ? { name: name.trim() } : {}),
      ...(baseUrl.trim() !== c.baseUrl ? { baseUrl: baseUrl.trim() } : {}),
      ...(timeout.trim() !== was ? { upstreamTimeoutMs: timeout.trim() ? Number(timeout) : null } : {}),
      ...(enforces !== c.enforcesOutputCap ? { enforcesOutputCap: enforces } : {}),
      ...(c.protocolProfile === 'bedrock' && awsRegion.trim() ? { awsRegion: awsRegion.trim() } : {}),
    };
    if (Object.keys(body).length === 0) return onDone();
    const res = await action.run(`Saving ${c.name}…`, () =>
      updateProviderConnection({ client, path: { providerConnectionId: c.id }, body }),
    );
    if (res) onDone();
  };
  return (
    <div class="bindings">
      <Form
        operation="updateProviderConnection"
        title={`Edit ${c.name}`}
        submit="Save connection"
        onSubmit={save}
        disabled={!!action.working}
      >
        <div class="grid">
          <Input label="Name" name="editConnectionName" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
          <Input
            label="Upstream base URL"
            hint={`For example ${PROFILES[c.protocolProfile]?.baseUrl ?? 'https://…'}`}
            name="editBaseUrl"
            type="url"
            required
            value={baseUrl}
            onInput={(e) => setBaseUrl(e.currentTarget.value)}
          />
        </div>
        {c.protocolProfile === 'bedrock' ? (
          <Input
            label="AWS region"
            hint="Empty: the region stored stays (it is write-only); credentials change with Rotate key"
            name="editAwsRegion"
            pattern="[a-z0-9\-]+"
            value={awsRegion}
            onInput={(e) => setAwsRegion(e.currentTarget.value)}
          />
        ) : null}
        <SharedSettings timeout={timeout} enforces={enforces} onTimeout={setTimeoutMs} onEnforces={setEnforces} />
      </Form>
      <ActionNotes action={action} />
    </div>
  );
}
