/** What the request middleware keeps in res.locals. */
export interface RequestLocals {
  requestId: string;
  startedAt: bigint;
  operationId?: string | undefined;
  actorKeyId?: string | undefined;
  /** The workspace and access the request names (its path's), for its log line. */
  workspaceId?: string | undefined;
  accessId?: string | undefined;
  /** A gateway call: whether the answer's status is the upstream's, relayed (the metrics' `source`). */
  upstreamAnswered?: () => boolean;
  /** The code of the Error body answered, for the log line. */
  errorCode?: string;
  /** The cause of a 500, for the log line only. */
  error?: unknown;
}
