/**
 * The S3 side of archive-store.ts, in a module of its own: the AWS SDK is loaded only when a bucket is first written or
 * read (archive-store.ts imports this module then), so a process that never archives to S3 does not hold it (about
 * 5 MiB resident at ready: docs/performance.md, "Memory").
 */
import { GetObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import type { ArchiveS3Access, ArchiveS3Config } from '../../config-archive.js';
import type { ArchiveStore } from './archive-store.js';

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
export function s3BucketStore(config: ArchiveS3Config, client: S3Client = s3ClientOf(config)): ArchiveStore {
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
