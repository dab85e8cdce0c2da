/**
 * What a `bedrock` connection's sealed secret holds. Bedrock takes either a Bedrock API key (sent as
 * `Authorization: Bearer`) or an IAM access key that signs each request with SigV4; either way the
 * region is part of it (SigV4 signs with it). The contract's `apiKey` is the API key, or, with
 * `awsAccessKeyId`, the secret access key; `awsRegion` and `awsSessionToken` complete it. The whole is
 * sealed as one JSON text, so the access key id and the session token are as write-only as the key.
 */
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import { AppError } from '../errors.js';

export type BedrockSecret =
  { region: string; apiKey: string } | { region: string; accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined };

/** The AWS fields a connection's create, test, update or rotate may carry beside apiKey. */
export interface AwsFields {
  awsRegion?: string | undefined;
  awsAccessKeyId?: string | undefined;
  awsSessionToken?: string | undefined;
}

const invalid = (message: string, param: string) => new AppError('invalid_parameter', message, { param });

/** The AWS fields of the contract a bedrock connection's secret is made of beside apiKey. */
export const AWS_FIELDS = ['awsRegion', 'awsAccessKeyId', 'awsSessionToken'] as const;

/**
 * The text a bedrock connection seals: its JSON secret, its region from `fields` or else from the connection's
 * current secret (`current`, opened only then). Throws 400 naming the field that is missing or out of place.
 */
export function sealBedrockSecret(apiKey: string, fields: AwsFields, current: (() => string) | undefined): string {
  const { awsRegion, awsAccessKeyId, awsSessionToken } = fields;
  const region = awsRegion ?? (current && parseBedrockSecret(current()).region);
  if (!region) throw invalid("A 'bedrock' connection needs awsRegion (the AWS region its requests go to, e.g. us-east-1)", 'awsRegion');
  if (awsSessionToken !== undefined && awsAccessKeyId === undefined) {
    throw invalid('awsSessionToken goes with awsAccessKeyId (SigV4): a Bedrock API key needs neither', 'awsAccessKeyId');
  }
  const secret: BedrockSecret =
    awsAccessKeyId === undefined
      ? { region, apiKey }
      : {
          region,
          accessKeyId: awsAccessKeyId,
          secretAccessKey: apiKey,
          ...(awsSessionToken !== undefined ? { sessionToken: awsSessionToken } : {}),
        };
  return JSON.stringify(secret);
}

/** A bedrock connection's secret as sealed (sealBedrockSecret); throws when it is not one. */
export function parseBedrockSecret(plaintext: string): BedrockSecret {
  let parsed: unknown;
  try {
    parsed = JSON.parse(plaintext);
  } catch {
    parsed = null;
  }
  const s = parsed as Record<string, unknown> | null;
  if (s && typeof s === 'object' && typeof s.region === 'string') {
    if (typeof s.apiKey === 'string') return { region: s.region, apiKey: s.apiKey };
    if (typeof s.accessKeyId === 'string' && typeof s.secretAccessKey === 'string') {
      return {
        region: s.region,
        accessKeyId: s.accessKeyId,
        secretAccessKey: s.secretAccessKey,
        sessionToken: typeof s.sessionToken === 'string' ? s.sessionToken : undefined,
      };
    }
  }
  throw new Error("The bedrock connection's secret is not a Bedrock credential");
}

/** The text a bedrock secret's preview is made from: the API key, or the access key id (not the secret key). */
export function bedrockPreviewSource(secret: BedrockSecret): string {
  return 'apiKey' in secret ? secret.apiKey : secret.accessKeyId;
}

/** What a Bedrock request's auth is made from: its target, its content type, and its body. */
export interface BedrockRequest {
  method: string;
  url: URL;
  contentType: string | undefined;
  body: Buffer;
}

/**
 * The headers that authenticate a request to Bedrock: `authorization: Bearer` for an API key; for an access
 * key, SigV4's (`authorization`, `x-amz-date`, `x-amz-content-sha256`, and `x-amz-security-token` for a
 * temporary credential),
 * signing the method, the path as sent, the query, the host, the content type and the body.
 */
export async function bedrockAuthHeaders(secret: BedrockSecret, request: BedrockRequest): Promise<Record<string, string>> {
  if ('apiKey' in secret) return { authorization: `Bearer ${secret.apiKey}` };
  const signer = new SignatureV4({
    service: 'bedrock',
    region: secret.region,
    credentials: { accessKeyId: secret.accessKeyId, secretAccessKey: secret.secretAccessKey, sessionToken: secret.sessionToken },
    sha256: Sha256,
  });
  const { url } = request;
  const headers: Record<string, string> = { host: url.host };
  if (request.contentType !== undefined) headers['content-type'] = request.contentType;
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of url.searchParams) {
    const had = query[name];
    query[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  const signed = await signer.sign({
    method: request.method,
    protocol: url.protocol,
    hostname: url.hostname,
    port: url.port ? Number(url.port) : undefined,
    path: url.pathname,
    query,
    headers,
    body: request.body,
  });
  // What the signer added: authorization, x-amz-date, x-amz-content-sha256, x-amz-security-token.
  const out: Record<string, string> = {};
  for (const name in signed.headers) if (!(name in headers)) out[name] = signed.headers[name]!;
  return out;
}
