/**
 * A call's request log (docs/request-logs.md), for a call whose route, plan or workspace keeps them: what it takes
 * of the call on its way (the request's allow-listed headers, the keys it must never keep, each attempt's answer:
 * a JSON or error answer's first bytes, a stream's answer assembled by its meter) and the entry it becomes once the
 * call is recorded. A call without a policy has no CallLog: the hot path reads one field and does nothing more.
 *
 * The entry is made lazily, by the recorder when it writes its batch (call-recorder.ts): the bodies are cut, the keys
 * scrubbed and the whole sealed off the call's path, after its client has its answer.
 */
import type { RequestLogEntry, LoggedAnswer, LoggedBody } from '../domain/request-logs/request-log-types.js';
import type { RequestLogPolicy } from '../domain/workspaces/request-log-policy.js';
import type { InvocationStatus } from '../domain/invocations/invocation-types.js';
import { AssembledAnswer } from '../protocols/stream.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const REDACTED = '[redacted]';
/** Keys shorter than this are not looked for (too short to be a key; replacing them would mangle the text). */
const MIN_SECRET_LENGTH = 8;
/** What looks like a key whoever's it is: a Nexus inference key, an `sk-` provider key (OpenAI's, Anthropic's). */
const KEY_LIKE = /\bnx-[a-z]+-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9_-]{20,}/g;

/** The request headers a log keeps: none can carry a key. */
const REQUEST_HEADERS = new Set([
  'content-type',
  'content-length',
  'accept',
  'user-agent',
  'openai-beta',
  'anthropic-version',
  'anthropic-beta',
  'x-request-id',
  'idempotency-key',
]);
/** The answer headers a log keeps. */
const ANSWER_HEADERS = new Set([
  'content-type',
  'content-length',
  'x-request-id',
  'request-id',
  'openai-processing-ms',
  'openai-model',
  'x-amzn-requestid',
  'x-amzn-errortype',
  'retry-after',
]);

/**
 * The policy a call follows, drawn when it opens: its route's, else its plan's, else its workspace's; none when that
 * is `off`, or `sampled` and the draw says no.
 */
export function logPolicyFor(
  route: RequestLogPolicy | null | undefined,
  plan: RequestLogPolicy | null,
  workspace: RequestLogPolicy | null,
  draw: () => number = Math.random,
): RequestLogPolicy | undefined {
  const policy = route ?? plan ?? workspace;
  if (!policy || policy.mode === 'off') return undefined;
  if (policy.mode === 'sampled' && draw() >= (policy.sampleRate ?? 0)) return undefined;
  return policy;
}

/** An attempt's answer as the log takes it: its status and headers, then its bytes (up to the cap), or its stream's answer. */
export class AnswerCapture {
  status: number | null = null;
  headers: Record<string, string> = {};
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private bytes = 0;
  /** A stream's answer, assembled by its meter. */
  assembled: AssembledAnswer | undefined;

  /** `room`: the bytes kept of a body (its cap, and some more for a key cut at the cap to be found whole). */
  constructor(private readonly room: number) {}

  /** The answer began: its status and allow-listed headers. */
  head(status: number, headers: Record<string, string | string[] | undefined>): void {
    this.status = status;
    this.headers = allowed(headers, ANSWER_HEADERS);
  }

  /** A stream's answer is assembled from its events (the meter fills it in). */
  stream(): AssembledAnswer {
    return (this.assembled = new AssembledAnswer(this.room));
  }

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.kept >= this.room) return;
    const part = chunk.length <= this.room - this.kept ? chunk : chunk.subarray(0, this.room - this.kept);
    this.chunks.push(part);
    this.kept += part.length;
  }

  /** What the log keeps of it, cut at `max` bytes, its keys scrubbed. */
  logged(max: number, secrets: readonly string[]): LoggedAnswer {
    const answer = this.assembled;
    if (!answer)
      return { status: this.status, assembled: false, ...body(Buffer.concat(this.chunks), this.bytes, this.headers, max, secrets) };
    const toolCalls = [...answer.toolCalls.values()].map((call) => ({
      ...(call.id ? { id: call.id } : {}),
      name: call.name,
      arguments: cut(scrub(call.arguments, secrets), max).text,
    }));
    return {
      status: this.status,
      assembled: true,
      ...body(Buffer.from(answer.text), answer.bytes, this.headers, max, secrets, answer.truncated),
      ...(toolCalls.length ? { toolCalls } : {}),
    };
  }
}

/** What the call is logged with: its policy, its request's headers, the keys to scrub, its last attempt's answer. */
export class CallLog {
  private requestHeaders: Record<string, string> = {};
  private readonly secrets = new Set<string>();
  private capture: AnswerCapture | undefined;

  constructor(
    readonly policy: RequestLogPolicy,
    /** The caller's inference key. */
    credential: string,
  ) {
    this.addSecret(credential);
  }

  /** The request's headers, those of the allow-list only. */
  request(rawHeaders: readonly string[]): void {
    const headers: Record<string, string> = {};
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!.toLowerCase();
      if (REQUEST_HEADERS.has(name)) headers[name] = rawHeaders[i + 1]!;
    }
    this.requestHeaders = headers;
  }

  /**
   * An attempt starts, with this provider key (and the part of a structured secret an answer could echo: a Bedrock
   * key's): its answer is the one kept (a route's last attempt's).
   */
  attempt(providerKey: string, visible: string | undefined): AnswerCapture {
    this.addSecret(providerKey);
    if (visible !== undefined) this.addSecret(visible);
    return (this.capture = new AnswerCapture(this.room));
  }

  /** Whether a call that ended so is kept (`failed`: one that did not succeed). */
  keeps(status: InvocationStatus): boolean {
    return this.policy.mode !== 'failed' || status !== 'SUCCEEDED';
  }

  /** What it holds in memory until written, about: the request's bytes and its answer's kept. */
  size(request: Buffer | undefined): number {
    return Math.min(request?.length ?? 0, this.room) + (this.capture ? this.room : 0);
  }

  /**
   * The entry, made when the recorder writes it. `request`: the body as it came, or a multipart upload's summary (its
   * fields and files as JSON: upload.ts's FormSummary).
   */
  entry(invocationId: string, workspaceId: string, startedAt: Date, request: Buffer | undefined): RequestLogEntry {
    const { maxBodyBytes: max, retentionDays } = this.policy;
    const secrets = [...this.secrets];
    const raw = request ?? Buffer.alloc(0);
    return {
      invocationId,
      workspaceId,
      createdAt: startedAt,
      expiresAt: new Date(startedAt.getTime() + retentionDays * DAY_MS),
      content: {
        request: body(raw.subarray(0, this.room), raw.length, this.requestHeaders, max, secrets),
        response: this.capture && this.capture.status !== null ? this.capture.logged(max, secrets) : null,
      },
    };
  }

  /** The bytes kept of a body: its cap, and room for a key cut there to be found whole (and scrubbed). */
  private get room(): number {
    return this.policy.maxBodyBytes + 512;
  }

  private addSecret(secret: string): void {
    if (secret.length >= MIN_SECRET_LENGTH) this.secrets.add(secret);
  }
}

function allowed(headers: Record<string, string | string[] | undefined>, names: ReadonlySet<string>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && names.has(name.toLowerCase())) kept[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return kept;
}

/** Every key of `secrets`, and anything that looks like a key, replaced. */
function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  return out.replace(KEY_LIKE, REDACTED);
}

/** `text` cut at `max` bytes of UTF-8 (never inside a character). */
function cut(text: string, max: number): { text: string; cut: boolean } {
  if (text.length <= max / 4 || Buffer.byteLength(text) <= max) return { text, cut: false };
  return {
    text: Buffer.from(text)
      .subarray(0, max)
      .toString('utf8')
      .replace(/\uFFFD$/, ''),
    cut: true,
  };
}

/** A body as logged: its kept bytes as text, scrubbed, then cut at `max`; `bytes`: its whole size. */
function body(
  kept: Buffer,
  bytes: number,
  headers: Record<string, string>,
  max: number,
  secrets: readonly string[],
  truncated = false,
): LoggedBody {
  const text = cut(scrub(kept.toString('utf8'), secrets), max);
  return { headers, body: text.text, bytes, truncated: truncated || text.cut || bytes > kept.length };
}
