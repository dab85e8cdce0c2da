/** What the request middleware keeps in res.locals. */
export interface RequestLocals {
  requestId: string;
  startedAt: bigint;
  operationId?: string | undefined;
  actorKeyId?: string | undefined;
  /** The workspace and access the request names (its path's), for its log line. */
  workspaceId?: string | undefined;
  accessId?: string | undefined;
  /**
   * A gateway call: its last upstream attempt, whose answer's status is the one relayed once it has one (the metrics'
   * `source`); none when the gateway answered instead.
   */
  upstream?: { readonly status: number | undefined } | undefined;
  /** The code of the Error body answered, for the log line. */
  errorCode?: string;
  /** The cause of a 500, for the log line only. */
  error?: unknown;
}
