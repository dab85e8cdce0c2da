/** The history archive's variables (src/config-archive.ts): a directory, or an S3-compatible bucket, not both. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { archiveS3AccessOf } from '../../src/config-archive.js';

const KEY = Buffer.alloc(32, 7).toString('base64');
const load = (env: Record<string, string>) => loadConfig({ NEXUS_ENCRYPTION_KEY: KEY, ...env }, () => {});

describe('the archive', () => {
  it('is off by default, or a directory', () => {
    expect(load({})).toMatchObject({ archiveDir: undefined, archiveS3: undefined });
    expect(load({ NEXUS_ARCHIVE_DIR: '/var/lib/nexus/archive' })).toMatchObject({
      archiveDir: '/var/lib/nexus/archive',
      archiveS3: undefined,
    });
  });

  it('is a bucket, its prefix ending in a slash, its region NEXUS_ARCHIVE_S3_REGION, else AWS_REGION, else us-east-1', () => {
    expect(load({ NEXUS_ARCHIVE_S3_BUCKET: 'nexus-archive' }).archiveS3).toEqual({
      bucket: 'nexus-archive',
      prefix: '',
      endpoint: undefined,
      region: 'us-east-1',
      forcePathStyle: false,
    });
    const minio = load({
      NEXUS_ARCHIVE_S3_BUCKET: 'nexus-archive',
      NEXUS_ARCHIVE_S3_PREFIX: '/history/eu',
      NEXUS_ARCHIVE_S3_ENDPOINT: 'http://minio:9000/',
      NEXUS_ARCHIVE_S3_FORCE_PATH_STYLE: 'true',
      AWS_REGION: 'eu-west-3',
    }).archiveS3;
    expect(minio).toEqual({
      bucket: 'nexus-archive',
      prefix: 'history/eu/',
      endpoint: 'http://minio:9000',
      region: 'eu-west-3',
      forcePathStyle: true,
    });
    expect(load({ NEXUS_ARCHIVE_S3_BUCKET: 'b12', NEXUS_ARCHIVE_S3_REGION: 'auto', AWS_REGION: 'eu-west-3' }).archiveS3!.region).toBe(
      'auto',
    );
    expect(archiveS3AccessOf({ NEXUS_ARCHIVE_S3_ENDPOINT: 'http://127.0.0.1:9000', NEXUS_ARCHIVE_S3_FORCE_PATH_STYLE: 'true' })).toEqual({
      endpoint: 'http://127.0.0.1:9000',
      region: 'us-east-1',
      forcePathStyle: true,
    });
  });

  it('refuses both a directory and a bucket, and a bad bucket name', () => {
    expect(() => load({ NEXUS_ARCHIVE_DIR: '/a', NEXUS_ARCHIVE_S3_BUCKET: 'nexus-archive' })).toThrow(
      new ConfigError('Invalid configuration: NEXUS_ARCHIVE_DIR and NEXUS_ARCHIVE_S3_BUCKET are both set: an archive goes to one of them'),
    );
    expect(() => load({ NEXUS_ARCHIVE_S3_BUCKET: 'Not_A_Bucket' })).toThrow(/NEXUS_ARCHIVE_S3_BUCKET must be a bucket name/);
    expect(() => load({ NEXUS_ARCHIVE_S3_BUCKET: 'b12', NEXUS_ARCHIVE_S3_ENDPOINT: 'minio:9000' })).toThrow(
      /NEXUS_ARCHIVE_S3_ENDPOINT must be an http\(s\) URL/,
    );
  });
});
