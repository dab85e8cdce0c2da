/**
 * What a request log holds (docs/request-logs.md): a call's request and answer as kept, each body capped, with the
 * headers of an allow-list. Sealed whole in its row (request-log-seal.ts); only its ids and times are in clear.
 */

/** A body as kept: its text up to the policy's cap, its whole size, whether it was cut. */
export interface LoggedBody {
  headers: Record<string, string>;
  body: string;
  bytes: number;
  truncated: boolean;
}

/** A tool call of a stream's answer, assembled from its deltas. */
interface LoggedToolCall {
  id?: string | undefined;
  name: string;
  arguments: string;
}

export interface LoggedAnswer extends LoggedBody {
  /** The provider's status; null: no answer came. */
  status: number | null;
  /** A stream's: `body` is its text, assembled from its events, and `toolCalls` its tool calls. */
  assembled: boolean;
  toolCalls?: LoggedToolCall[] | undefined;
}

export interface RequestLogContent {
  request: LoggedBody;
  /** null: refused before a provider was called. */
  response: LoggedAnswer | null;
}

/** One call's log, as the gateway hands it to the recorder and the Admin API reads it back. */
export interface RequestLogEntry {
  invocationId: string;
  workspaceId: string;
  /** Its call's start. */
  createdAt: Date;
  expiresAt: Date;
  content: RequestLogContent;
}

/** A row of request_logs. */
export interface RequestLogRow {
  invocation_id: string;
  created_at: Date;
  workspace_id: string;
  expires_at: Date;
  key_id: string;
  ciphertext: string;
}
