/**
 * A minimal S3-compatible store for the archive's tests: real HTTP on 127.0.0.1, path-style URLs
 * (`/<bucket>/<key>`), PutObject, GetObject, HeadObject and ListObjectsV2, the bytes kept in memory. It does not
 * check signatures, but refuses a request without an Authorization header (403), and a PutObject whose
 * Content-MD5 does not match its body (400 BadDigest), as S3 does. `failPuts` makes every PutObject answer 500.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listenLocal } from './local-server.js';

interface S3Object {
  bytes: Buffer;
  contentType: string | undefined;
}

export interface S3TestServer {
  url: string;
  /** The objects stored, by `<bucket>/<key>`. */
  objects: Map<string, S3Object>;
  /** Each request, as `<METHOD> <path>`. */
  requests: string[];
  failPuts: boolean;
  /** PutObjects that came with a Content-MD5 (checked against their body). */
  putsWithMd5: number;
  close(): Promise<void>;
}

const xml = (res: ServerResponse, status: number, body: string) => {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?>\n${body}`);
};

const error = (res: ServerResponse, status: number, code: string, message: string) =>
  xml(res, status, `<Error><Code>${code}</Code><Message>${message}</Message></Error>`);

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function list(state: S3TestServer, res: ServerResponse, bucket: string, prefix: string): void {
  const keys = [...state.objects.keys()]
    .filter((k) => k.startsWith(`${bucket}/${prefix}`))
    .map((k) => k.slice(bucket.length + 1))
    .sort();
  const contents = keys
    .map((key) => `<Contents><Key>${escape(key)}</Key><Size>${state.objects.get(`${bucket}/${key}`)!.bytes.length}</Size></Contents>`)
    .join('');
  xml(
    res,
    200,
    `<ListBucketResult><Name>${bucket}</Name><Prefix>${escape(prefix)}</Prefix><KeyCount>${keys.length}</KeyCount>` +
      `<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>${contents}</ListBucketResult>`,
  );
}

function handle(state: S3TestServer, req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const url = new URL(req.url!, 'http://s3.local');
  state.requests.push(`${req.method} ${url.pathname}`);
  if (!req.headers.authorization) return error(res, 403, 'AccessDenied', 'The request is not signed');
  const [, bucket = '', ...rest] = url.pathname.split('/');
  const key = decodeURIComponent(rest.join('/'));
  if (!key) {
    if (req.method === 'GET' && url.searchParams.get('list-type') === '2')
      return list(state, res, bucket, url.searchParams.get('prefix') ?? '');
    return error(res, 400, 'InvalidRequest', 'Not an operation of this store');
  }
  const object = state.objects.get(`${bucket}/${key}`);
  if (req.method === 'PUT') {
    if (state.failPuts) return error(res, 500, 'InternalError', 'We encountered an internal error. Please try again.');
    const md5 = req.headers['content-md5'];
    if (md5 && md5 !== createHash('md5').update(body).digest('base64'))
      return error(res, 400, 'BadDigest', 'The Content-MD5 you specified did not match what we received.');
    if (md5) state.putsWithMd5++;
    state.objects.set(`${bucket}/${key}`, { bytes: body, contentType: req.headers['content-type'] });
    res.writeHead(200, { etag: `"${createHash('md5').update(body).digest('hex')}"` });
    return void res.end();
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') return error(res, 405, 'MethodNotAllowed', 'Not allowed');
  if (!object) {
    if (req.method === 'HEAD') return void res.writeHead(404).end();
    return error(res, 404, 'NoSuchKey', 'The specified key does not exist.');
  }
  res.writeHead(200, {
    'content-type': object.contentType ?? 'application/octet-stream',
    'content-length': object.bytes.length,
    etag: `"${createHash('md5').update(object.bytes).digest('hex')}"`,
  });
  res.end(req.method === 'HEAD' ? undefined : object.bytes);
}

export async function startS3Server(): Promise<S3TestServer> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(state, req, res, Buffer.concat(chunks)));
  });
  const state: S3TestServer = {
    url: await listenLocal(server),
    objects: new Map(),
    requests: [],
    failPuts: false,
    putsWithMd5: 0,
    close: () => closeServer(server),
  };
  return state;
}
