/**
 * Where archive.ts writes a month's files and manifest, and reads them back: a directory (NEXUS_ARCHIVE_DIR), or an
 * S3-compatible bucket (NEXUS_ARCHIVE_S3_BUCKET, docs/operations.md "Archive to S3"). A store's `put` returns once
 * the object is stored whole; archive.ts reads every object back before the month is dropped.
 *
 * S3: each object is one PutObject (a file holds at most 100,000 rows, tens of MB: far under PutObject's 5 GB, so no
 * multipart upload), sent with its Content-MD5, which the store checks before it keeps the object (a body changed on
 * the way is refused, not stored). The credentials come from the AWS SDK's standard chain (environment, profile,
 * role), never from Nexus's configuration, and are never logged. The SDK's own extra checksums are sent only where
 * an operation requires them: S3-compatible stores do not all take them.
 */
import { GetObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ArchiveS3Access, ArchiveS3Config } from '../../config-archive.js';

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

/** An S3 client for the store's endpoint and region, its credentials from the SDK's chain. */
export function s3ClientOf(access: ArchiveS3Access): S3Client {
  return new S3Client({
    region: access.region,
    ...(access.endpoint ? { endpoint: access.endpoint } : {}),
    forcePathStyle: access.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** What an S3 failure says: its code and status, never a request's headers or credentials. */
function s3Problem(err: unknown, what: string): Error {
  if (err instanceof S3ServiceException) {
    return new Error(`${what}: the store answered ${err.$metadata.httpStatusCode ?? '?'} ${err.name}: ${err.message}`);
  }
  return new Error(`${what}: ${(err as Error)?.message ?? String(err)}`);
}

/** A bucket, under the config's key prefix. */
export function s3Store(config: ArchiveS3Config, client: S3Client = s3ClientOf(config)): ArchiveStore {
  const key = (name: string) => `${config.prefix}${name}`;
  const where = (name: string) => `s3://${config.bucket}/${key(name)}`;
  return {
    async put(name, bytes, contentType) {
      try {
        await client.send(
          new PutObjectCommand({
            Bucket: config.bucket,
            Key: key(name),
            Body: bytes,
            ContentType: contentType,
            ContentLength: bytes.length,
            ContentMD5: createHash('md5').update(bytes).digest('base64'),
          }),
        );
      } catch (err) {
        throw s3Problem(err, `archive: storing ${where(name)} failed`);
      }
    },
    async get(name) {
      try {
        const answer = await client.send(new GetObjectCommand({ Bucket: config.bucket, Key: key(name) }));
        return await answer.Body!.transformToByteArray();
      } catch (err) {
        throw s3Problem(err, `archive: reading ${where(name)} failed`);
      }
    },
    where,
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
