/**
 * Where archive.ts writes a month's files and manifest, and reads them back: a directory (NEXUS_ARCHIVE_DIR), or an
 * S3-compatible bucket (NEXUS_ARCHIVE_S3_BUCKET, docs/operations.md "Archive to S3"). A store's `put` returns once
 * the object is stored whole; archive.ts reads every object back before the month is dropped.
 *
 * S3 (archive-s3.ts, loaded at the first use): each object is one PutObject (a file holds at most 100,000 rows, tens of MB: far under PutObject's 5 GB, so no
 * multipart upload), sent with its Content-MD5, which the store checks before it keeps the object (a body changed on
 * the way is refused, not stored). The credentials come from the AWS SDK's standard chain (environment, profile,
 * role), never from Nexus's configuration, and are never logged. The SDK's own extra checksums are sent only where
 * an operation requires them: S3-compatible stores do not all take them.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ArchiveS3Config } from '../../config-archive.js';

export interface ArchiveStore {
  /** Stores `bytes` under `name`, whole or not at all; resolves once stored. */
  put(name: string, bytes: Uint8Array, contentType: string): Promise<void>;
  /** The bytes stored under `name`. */
  get(name: string): Promise<Uint8Array>;
  /** Where `name` is, for messages (`<dir>/<name>`, `s3://<bucket>/<key>`). */
  where(name: string): string;
}

/** A directory: each file written under a temporary name and renamed, so that it is there whole or not at all. */
export function dirStore(dir: string): ArchiveStore {
  return {
    put(name, bytes) {
      mkdirSync(dir, { recursive: true });
      const path = join(dir, name);
      writeFileSync(`${path}.tmp`, bytes);
      renameSync(`${path}.tmp`, path);
      return Promise.resolve();
    },
    get: (name) => Promise.resolve(readFileSync(join(dir, name))),
    where: (name) => join(dir, name),
  };
}

/**
 * A bucket, under the config's key prefix. The AWS SDK (archive-s3.ts) is loaded at the first `put` or `get`, and the
 * client made then, once.
 */
export function s3Store(config: ArchiveS3Config): ArchiveStore {
  let store: Promise<ArchiveStore> | undefined;
  const bucket = () => (store ??= import('./archive-s3.js').then((s3) => s3.s3BucketStore(config)));
  return {
    put: async (name, bytes, contentType) => (await bucket()).put(name, bytes, contentType),
    get: async (name) => (await bucket()).get(name),
    where: (name) => `s3://${config.bucket}/${config.prefix}${name}`,
  };
}

/** An `s3://bucket/key` URL's bucket, and its key's folder and name; undefined when `path` is no such URL. */
export function parseS3Url(path: string): { bucket: string; prefix: string; name: string } | undefined {
  const match = /^s3:\/\/([^/]+)\/(.+)$/.exec(path);
  if (!match) return undefined;
  const key = match[2]!;
  const slash = key.lastIndexOf('/');
  return { bucket: match[1]!, prefix: key.slice(0, slash + 1), name: key.slice(slash + 1) };
}
