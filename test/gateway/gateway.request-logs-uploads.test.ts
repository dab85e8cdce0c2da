/**
 * Request logs of multipart uploads (docs/request-logs.md, "What a log holds"), through the official OpenAI SDK
 * against the media upstream on 127.0.0.1: a transcription and an image edit of a workspace that keeps its logs
 * keep the form's text fields and, per file, its field, name, type, size and SHA-256, never the file's bytes (a
 * spooled upload's too: its files are read back from its spool, held for that after the call); a key pasted in a
 * field is scrubbed; a small cap cuts the summary; a workspace without a policy keeps none.
 */
import { createHash } from 'node:crypto';
import { toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { getInvocationLog, updateWorkspace } from '../support/sdk.js';
import { wavOf } from '../support/wav.js';
import { openAiFor, type Tenant } from './gateway-support.js';
import { mediaRig } from './media-support.js';

const rig = mediaRig();

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

const keep = (tenant: Tenant, requestLog: Parameters<typeof updateWorkspace>[0]['body']['requestLog']) =>
  updateWorkspace({ client: rig.t.client, path: { workspaceId: tenant.workspaceId }, body: { requestLog } });

/** The invocation of a call (by its answer's request id), once its records and log are written. */
async function invocationOf(requestId: string | null): Promise<string> {
  expect(requestId).toBeTruthy();
  await rig.t.nexus.gateway.drain();
  const row = (await rig.t.database.db('invocations').where({ request_id: requestId }).first<{ id: string } | undefined>('id'))!;
  // An upload's log is handed over once its files' checksums are read back: wait for it to be written.
  for (let i = 0; i < 100 && !(await rig.t.database.db('request_logs').where({ invocation_id: row.id }).first()); i++) {
    await new Promise((r) => setTimeout(r, 20));
    await rig.t.nexus.gateway.drain();
  }
  return row.id;
}

interface Summary {
  files: { field: string; filename: string; contentType: string; size: number; sha256: string | null }[];
  fields: Record<string, string>;
}

describe('a workspace that keeps its logs, beside one that does not', () => {
  it('keeps a transcription’s fields and its file’s name, type, size and SHA-256, not its bytes', async () => {
    const tenant = await rig.tenantWith({});
    expect((await keep(tenant, { mode: 'all' })).response.status).toBe(200);
    // 50 s of audio, 1.6 MB: past what stays in memory, so the upload is spooled to a file.
    const wav = wavOf(50);
    wav.write('nexus-wav-marker', 1000, 'latin1');
    const { data, response } = await openAiFor(tenant)
      .audio.transcriptions.create({
        file: await toFile(wav, 'meeting.wav', { type: 'audio/wav' }),
        model: 'whisper-1',
        prompt: 'Names: Ada, Grace',
        language: 'en',
      })
      .withResponse();
    expect(data.text).toBe('hello from the fake transcriber');
    const id = await invocationOf(response.headers.get('x-nexus-request-id'));

    const log = await getInvocationLog({ client: rig.t.client, path: { invocationId: id } });
    expect(log.response.status).toBe(200);
    const request = log.data!.request;
    expect(request.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(request.truncated).toBe(false);
    expect(request.body).not.toContain('nexus-wav-marker');
    const summary = JSON.parse(request.body) as Summary;
    expect(summary).toEqual({
      files: [{ field: 'file', filename: 'meeting.wav', contentType: 'audio/wav', size: wav.length, sha256: sha256(wav) }],
      fields: { model: 'whisper-1', prompt: 'Names: Ada, Grace', language: 'en' },
    });
    expect(request.bytes).toBe(Buffer.byteLength(request.body));
    expect(JSON.parse(log.data!.response!.body)).toMatchObject({ text: 'hello from the fake transcriber' });

    // A streamed transcription's log has the same summary, and its answer assembled.
    const streamed = await openAiFor(tenant, { 'x-fake-usage': '90,12' })
      .audio.transcriptions.create({
        file: await toFile(wav, 'meeting.wav', { type: 'audio/wav' }),
        model: 'gpt-4o-transcribe',
        stream: true,
      })
      .withResponse();
    for await (const _event of streamed.data) void _event;
    const streamedId = await invocationOf(streamed.response.headers.get('x-nexus-request-id'));
    const streamedLog = (await getInvocationLog({ client: rig.t.client, path: { invocationId: streamedId } })).data!;
    expect((JSON.parse(streamedLog.request.body) as Summary).files[0]!.sha256).toBe(sha256(wav));
    expect(streamedLog.response).toMatchObject({ assembled: true });
  });

  it('keeps an image edit’s prompt and its images’ summaries, scrubs a key pasted in a field, and cuts at the cap', async () => {
    const tenant = await rig.tenantWith({});
    expect((await keep(tenant, { mode: 'all', maxBodyBytes: 1024 })).response.status).toBe(200);
    // 1.5 MB: spooled to a file, from which both files are read back after the call.
    const image = Buffer.alloc(1536 * 1024, 7);
    const mask = Buffer.alloc(2048, 3);
    const prompt = `Paint it blue, my key is ${tenant.apiKey}`;
    const { response } = await openAiFor(tenant)
      .images.edit({
        model: 'gpt-image-1',
        image: await toFile(image, 'photo.png', { type: 'image/png' }),
        mask: await toFile(mask, 'mask.png', { type: 'image/png' }),
        prompt,
      })
      .withResponse();
    const id = await invocationOf(response.headers.get('x-nexus-request-id'));
    const request = (await getInvocationLog({ client: rig.t.client, path: { invocationId: id } })).data!.request;
    expect(request.body).not.toContain(tenant.apiKey);
    const summary = JSON.parse(request.body) as Summary;
    expect(summary.files).toEqual([
      { field: 'image', filename: 'photo.png', contentType: 'image/png', size: image.length, sha256: sha256(image) },
      { field: 'mask', filename: 'mask.png', contentType: 'image/png', size: mask.length, sha256: sha256(mask) },
    ]);
    expect(summary.fields).toMatchObject({ model: 'gpt-image-1', prompt: 'Paint it blue, my key is [redacted]' });

    // A prompt longer than the cap: the summary is cut there (its files first, whole), and says so.
    const long = 'a very long prompt '.repeat(100);
    const cut = await openAiFor(tenant)
      .images.edit({ model: 'gpt-image-1', image: await toFile(image, 'photo.png', { type: 'image/png' }), prompt: long })
      .withResponse();
    const cutLog = (
      await getInvocationLog({
        client: rig.t.client,
        path: { invocationId: await invocationOf(cut.response.headers.get('x-nexus-request-id')) },
      })
    ).data!.request;
    expect(cutLog.truncated).toBe(true);
    expect(Buffer.byteLength(cutLog.body)).toBeLessThanOrEqual(1024);
    expect(cutLog.body).toContain(`"sha256":"${sha256(image)}"`);
    expect(cutLog.bytes).toBeGreaterThan(long.length);
  });

  it('keeps nothing of a workspace without a policy', async () => {
    const tenant = await rig.tenantWith({});
    const { response } = await openAiFor(tenant)
      .audio.transcriptions.create({ file: await toFile(wavOf(1), 'a.wav', { type: 'audio/wav' }), model: 'whisper-1' })
      .withResponse();
    const id = await invocationOf(response.headers.get('x-nexus-request-id'));
    expect(await rig.t.database.db('request_logs').where({ workspace_id: tenant.workspaceId })).toHaveLength(0);
    const none = await getInvocationLog({ client: rig.t.client, path: { invocationId: id } });
    expect(none.response.status).toBe(404);
  });
});
