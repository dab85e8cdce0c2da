/** What the request middleware keeps in res.locals. */
export interface RequestLocals {
  requestId: string;
  startedAt: bigint;
  operationId?: string | undefined;
  actorKeyId?: string | undefined;
  /** The cause of a 500, for the log line only. */
  error?: unknown;
}
