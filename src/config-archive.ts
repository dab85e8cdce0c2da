/**
 * The variables of history's archive (docs/operations.md, "Archive"), part of the one schema of src/config.ts: a
 * directory, or an S3-compatible bucket (AWS S3, MinIO, Cloudflare R2...). The bucket's credentials are not read
 * here: the AWS SDK takes them from its standard chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, a
 * role), and they are never logged.
 */
import { z } from 'zod';
import { flag, httpUrl } from './config-values.js';

export const archiveVariables = z.object({
  // Where an expired month of history is written (Parquet) before it is dropped; unset: dropped without an archive.
  NEXUS_ARCHIVE_DIR: z.string().min(1).optional(),
  // Or an S3-compatible bucket, under an optional key prefix, at an optional endpoint (MinIO, R2...).
  NEXUS_ARCHIVE_S3_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, { error: 'must be a bucket name (3 to 63 lowercase letters, digits, dots, dashes)' })
    .optional(),
  NEXUS_ARCHIVE_S3_PREFIX: z
    .string()
    .regex(/^[^\s]*$/, { error: 'must be a key prefix without spaces' })
    .optional(),
  NEXUS_ARCHIVE_S3_ENDPOINT: httpUrl.optional(),
  NEXUS_ARCHIVE_S3_REGION: z.string().min(1).optional(),
  NEXUS_ARCHIVE_S3_FORCE_PATH_STYLE: flag(false),
  // The AWS SDK's own name for the region, read when NEXUS_ARCHIVE_S3_REGION is unset.
  AWS_REGION: z.string().min(1).optional(),
});

type ArchiveVariables = z.output<typeof archiveVariables>;

/** A bad combination of the archive's variables (src/config.ts makes it a ConfigError). */
export class ArchiveConfigError extends Error {}

/** Where an S3 archive goes: the bucket, the key prefix (empty or ending in `/`), and how the store is reached. */
export interface ArchiveS3Config {
  bucket: string;
  prefix: string;
  /** undefined: AWS S3 itself. */
  endpoint: string | undefined;
  region: string;
  /** Path-style URLs (`<endpoint>/<bucket>/<key>`), as MinIO and most self-hosted stores need. */
  forcePathStyle: boolean;
}

/** The S3 store's settings without a bucket (the CLI reads the bucket from a manifest's s3:// URL). */
export type ArchiveS3Access = Omit<ArchiveS3Config, 'bucket' | 'prefix'>;

function accessOf(v: ArchiveVariables): ArchiveS3Access {
  return {
    endpoint: v.NEXUS_ARCHIVE_S3_ENDPOINT?.replace(/\/+$/, ''),
    region: v.NEXUS_ARCHIVE_S3_REGION ?? v.AWS_REGION ?? 'us-east-1',
    forcePathStyle: v.NEXUS_ARCHIVE_S3_FORCE_PATH_STYLE,
  };
}

export function archiveFields(v: ArchiveVariables) {
  if (v.NEXUS_ARCHIVE_DIR && v.NEXUS_ARCHIVE_S3_BUCKET) {
    throw new ArchiveConfigError('NEXUS_ARCHIVE_DIR and NEXUS_ARCHIVE_S3_BUCKET are both set: an archive goes to one of them');
  }
  const prefix = (v.NEXUS_ARCHIVE_S3_PREFIX ?? '').replace(/^\/+/, '');
  return {
    /** Where an expired month of history is archived to Parquet before it is dropped; undefined: no archive there. */
    archiveDir: v.NEXUS_ARCHIVE_DIR,
    /** Or the S3-compatible bucket it is archived to; undefined: none. */
    archiveS3: v.NEXUS_ARCHIVE_S3_BUCKET
      ? Object.freeze<ArchiveS3Config>({
          bucket: v.NEXUS_ARCHIVE_S3_BUCKET,
          prefix: prefix && !prefix.endsWith('/') ? `${prefix}/` : prefix,
          ...accessOf(v),
        })
      : undefined,
  };
}

/** The S3 store's endpoint, region and URL style alone, from the environment (`nexus archive verify s3://...`). */
export function archiveS3AccessOf(env: Record<string, string | undefined>): ArchiveS3Access {
  const set: Record<string, string> = {};
  for (const [name, value] of Object.entries(env))
    if (value !== undefined && value !== '' && name in archiveVariables.shape) set[name] = value;
  const parsed = archiveVariables.safeParse(set);
  if (!parsed.success) {
    throw new ArchiveConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`).join('; '));
  }
  return accessOf(parsed.data);
}
