/**
 * A request log policy (docs/request-logs.md): whether a scope's gateway calls keep their request and answer bodies,
 * which of them, how much of each body and for how long. A workspace, a plan and a route may each set one; a call
 * follows its route's, else its plan's, else its workspace's (null on a scope: the next one's applies).
 */
import { AppError } from '../../errors.js';

type RequestLogMode = 'off' | 'all' | 'failed' | 'sampled';

export interface RequestLogPolicy {
  mode: RequestLogMode;
  /** With `sampled`: the fraction of calls kept (drawn when a call opens). */
  sampleRate?: number | undefined;
  /** Each body is kept up to this many bytes, then cut (and says so). */
  maxBodyBytes: number;
  /** A log is removed this many days after its call started. */
  retentionDays: number;
}

const DEFAULT_MAX_BODY_BYTES = 64 * 1024;
const DEFAULT_RETENTION_DAYS = 7;

/** What the contract lets through (its bounds are checked there too): the stored policy, its defaults filled in. */
export interface RequestLogPolicyInput {
  mode: RequestLogMode;
  sampleRate?: number | undefined;
  maxBodyBytes?: number | undefined;
  retentionDays?: number | undefined;
}

/** The policy as stored (null: none); a sample rate without `sampled`, or `sampled` without one, is refused 400. */
export function requestLogPolicyOf(input: RequestLogPolicyInput | null, param = 'requestLog'): RequestLogPolicy | null {
  if (input === null) return null;
  const sampled = input.mode === 'sampled';
  if (sampled && input.sampleRate === undefined)
    throw new AppError('invalid_parameter', `${param}.sampleRate is required with mode sampled`, { param: `${param}.sampleRate` });
  if (!sampled && input.sampleRate !== undefined)
    throw new AppError('invalid_parameter', `${param}.sampleRate is only read with mode sampled`, { param: `${param}.sampleRate` });
  return {
    mode: input.mode,
    ...(sampled ? { sampleRate: input.sampleRate } : {}),
    maxBodyBytes: input.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    retentionDays: input.retentionDays ?? DEFAULT_RETENTION_DAYS,
  };
}

/** Whether two stored policies say the same. */
export const samePolicy = (a: RequestLogPolicy | null, b: RequestLogPolicy | null): boolean =>
  a === b ||
  (a !== null &&
    b !== null &&
    a.mode === b.mode &&
    a.sampleRate === b.sampleRate &&
    a.maxBodyBytes === b.maxBodyBytes &&
    a.retentionDays === b.retentionDays);
