/**
 * The Bedrock protocol's parts without I/O: the event-stream framing (protocols/event-stream.ts), its meter
 * (event-stream-meter.ts), the protocol table (src/protocols/bedrock.ts), a bedrock connection's secret and its
 * SigV4 signature (bedrock-secret.ts), and the ARN path rule (bedrock.ts slashesInPath, checked by path-safety.ts).
 */
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { bedrockAuthHeaders, bedrockPreviewSource, parseBedrockSecret } from '../../src/protocols/bedrock-secret.js';
import { EventStreamMeter } from '../../src/gateway/event-stream-meter.js';
import { inspectorFor, prepareCall, usageFromJson } from '../../src/protocols/inspectors.js';
import { checkSlashesFor, parseGatewayUrl } from '../../src/gateway/path-safety.js';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { FOREIGN, FOREIGN_FACTOR, InputTally } from '../../src/protocols/input-estimate.js';
import { ANTHROPIC_TOOLS_TOKENS } from '../../src/protocols/anthropic.js';
import { awsErrorType, bedrockInput, converseUsage, modelInPath } from '../../src/protocols/bedrock.js';
import { EventStreamDecoder, EventStreamError, eventFrame, MAX_FRAME_BYTES } from '../../src/protocols/event-stream.js';
import { connectionSecret, protocolOf } from '../../src/protocols/index.js';

const converse = inspectorFor('bedrock', 'POST', 'model/m/converse')!;
const stream = inspectorFor('bedrock', 'POST', 'model/m/converse-stream')!;
const MODEL = 'anthropic.claude-3-haiku-20240307-v1:0';
const PATH = `model/${encodeURIComponent(MODEL)}/converse-stream`;

/** A ConverseStream as Bedrock sends it: `words` one a delta, then the usage. */
function converseFrames(words: string[], usage: Record<string, number> | null = { inputTokens: 10, outputTokens: words.length }) {
  return [
    eventFrame('messageStart', { role: 'assistant' }),
    ...words.map((w) => eventFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { text: w } })),
    eventFrame('contentBlockStop', { contentBlockIndex: 0 }),
    eventFrame('messageStop', { stopReason: 'end_turn' }),
    ...(usage ? [eventFrame('metadata', { usage, metrics: { latencyMs: 3 } })] : []),
  ];
}

/** Decodes a whole stream (what a client gets) into `{ [eventType]: payload }` events. */
function eventsOf(bytes: Buffer): Record<string, any>[] {
  const decoder = new EventStreamDecoder();
  const frames = decoder.push(bytes);
  decoder.end();
  return frames.map((f) => ({
    [f.headers[':message-type'] === 'exception' ? f.headers[':exception-type']! : f.headers[':event-type']!]: JSON.parse(
      Buffer.from(f.body).toString('utf8'),
    ),
  }));
}

/** Feeds `bytes` to a meter `size` bytes at a time; returns what the client got. */
function feed(meter: EventStreamMeter, bytes: Buffer, size: number): Buffer {
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(meter.push(bytes.subarray(i, i + size)));
  out.push(meter.end());
  return Buffer.concat(out);
}

describe('the event-stream decoder', () => {
  const frames = converseFrames(['héllo', ' 世界', '!']);
  const all = Buffer.concat(frames);

  it.each([1, 2, 3, 7, 16, 100, all.length])('reads the same frames whatever the chunks (%i bytes a chunk)', (size) => {
    const decoder = new EventStreamDecoder();
    const got = [];
    for (let i = 0; i < all.length; i += size) got.push(...decoder.push(all.subarray(i, i + size)));
    decoder.end();
    expect(got.map((f) => f.headers[':event-type'])).toEqual([
      'messageStart',
      'contentBlockDelta',
      'contentBlockDelta',
      'contentBlockDelta',
      'contentBlockStop',
      'messageStop',
      'metadata',
    ]);
    expect(Buffer.concat(got.map((f) => f.raw))).toEqual(all);
    expect(JSON.parse(Buffer.from(got[2]!.body).toString())).toEqual({ contentBlockIndex: 0, delta: { text: ' 世界' } });
  });

  it('a frame whose checksum fails is an EventStreamError carrying the frames before it', () => {
    const broken = Buffer.from(all);
    const at = frames[0]!.length + frames[1]!.length + 20;
    broken[at] = broken[at]! ^ 0x01;
    const decoder = new EventStreamDecoder();
    let caught: unknown;
    try {
      decoder.push(broken);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(EventStreamError);
    expect((caught as EventStreamError).message).toMatch(/does not decode: .*checksum/);
    expect((caught as EventStreamError).before).toHaveLength(2);
  });

  it('a length out of range, and a stream that ends inside a frame, are EventStreamErrors', () => {
    const huge = Buffer.alloc(16);
    huge.writeUInt32BE(MAX_FRAME_BYTES + 1, 0);
    expect(() => new EventStreamDecoder().push(huge)).toThrow(EventStreamError);
    const tiny = Buffer.alloc(8);
    tiny.writeUInt32BE(4, 0);
    expect(() => new EventStreamDecoder().push(tiny)).toThrow(/outside/);
    // Held behind a frame's start, a bad length is refused as soon as its prefix is whole, not waited for.
    const late = new EventStreamDecoder();
    expect(late.push(Buffer.concat([all.subarray(0, frames[0]!.length), huge.subarray(0, 2)]))).toHaveLength(1);
    expect(() => late.push(huge.subarray(2))).toThrow(/outside/);
    const cut = new EventStreamDecoder();
    expect(cut.push(all.subarray(0, frames[0]!.length + 5))).toHaveLength(1);
    expect(() => cut.end()).toThrow(/ended inside a frame \(5 bytes/);
  });
});

describe('the event-stream meter', () => {
  const bounds = { usageInjected: false, inputBound: 50n, outputBound: 100n };

  it.each([1, 5, 64, 10_000])('forwards the frames unchanged and reads the usage of the metadata event (%i-byte chunks)', (size) => {
    const all = Buffer.concat(
      converseFrames(['a', 'b', 'c'], { inputTokens: 7, outputTokens: 3, cacheReadInputTokens: 2, cacheWriteInputTokens: 1 }),
    );
    const meter = new EventStreamMeter(stream, bounds);
    expect(feed(meter, all, size)).toEqual(all);
    expect(meter).toMatchObject({ complete: true, cut: false, malformed: undefined });
    expect(meter.usage).toEqual({ inputTokens: 10n, cachedInputTokens: 2n, outputTokens: 3n, cacheWriteTokens: 1n });
  });

  it('a stream without its metadata event is incomplete, its output estimated from the events', () => {
    const meter = new EventStreamMeter(stream, bounds);
    feed(meter, Buffer.concat(converseFrames(['a', 'b', 'c', 'd'], null)), 9);
    expect(meter.complete).toBe(false);
    expect(meter.usage).toBeNull();
    expect(meter.outputEstimate).toBeGreaterThanOrEqual(4n);
  });

  it('past its output bound: cut before the event, ended with the open block stopped, max_tokens and the usage charged', () => {
    const meter = new EventStreamMeter(stream, { usageInjected: false, inputBound: 50n, outputBound: 2n });
    const out = feed(meter, Buffer.concat(converseFrames(['a', 'b', 'c', 'd'])), 11);
    expect(meter.cut).toBe(true);
    expect(eventsOf(out)).toEqual([
      { messageStart: { role: 'assistant' } },
      { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'a' } } },
      { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'b' } } },
      { contentBlockStop: { contentBlockIndex: 0 } },
      { messageStop: { stopReason: 'max_tokens' } },
      { metadata: { usage: { inputTokens: 50, outputTokens: 2, totalTokens: 52 }, metrics: { latencyMs: 0 } } },
    ]);
  });

  it('a broken frame: the frames before it, then an internalServerException; nothing after; malformed, incomplete', () => {
    const frames = converseFrames(['a', 'b', 'c']);
    const broken = Buffer.from(frames[2]!);
    broken[broken.length - 6] = broken[broken.length - 6]! ^ 0xff;
    frames[2] = broken;
    const meter = new EventStreamMeter(stream, bounds);
    const out = feed(meter, Buffer.concat(frames), 1000);
    const events = eventsOf(out);
    expect(events.slice(0, 2)).toEqual([
      { messageStart: { role: 'assistant' } },
      { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'a' } } },
    ]);
    expect(events[2]!.internalServerException.message).toMatch(/^The provider's event stream broke: .*checksum/);
    expect(events).toHaveLength(3);
    expect(meter.malformed).toBeInstanceOf(EventStreamError);
    expect(meter.complete).toBe(false);
  });

  it('a stream that ends inside a frame ends with the exception too', () => {
    const all = Buffer.concat(converseFrames(['a']));
    const meter = new EventStreamMeter(stream, bounds);
    const out = Buffer.concat([meter.push(all.subarray(0, all.length - 3)), meter.end()]);
    expect(eventsOf(out).at(-1)!.internalServerException.message).toMatch(/ended inside a frame/);
    expect(meter.malformed).toBeDefined();
  });
});

describe('the bedrock protocol table', () => {
  const bedrock = protocolOf('bedrock');

  it('meters converse and converse-stream under model/{id}, an ARN too; refuses invoke; meters nothing else', () => {
    expect(inspectorFor('bedrock', 'POST', `model/${MODEL}/converse`)?.endpoint).toBe('converse');
    expect(inspectorFor('bedrock', 'POST', 'model/arn:aws:bedrock:us-east-1:1:inference-profile/us.x/converse-stream')?.endpoint).toBe(
      'converse-stream',
    );
    expect(inspectorFor('bedrock', 'GET', `model/${MODEL}/converse`)).toBeUndefined();
    expect(inspectorFor('bedrock', 'POST', 'v1/chat/completions')).toBeUndefined();
    // InvokeModel is refused by checkRequest (not a metered path: its endpoint is undefined), whatever the workspace allows.
    expect(() => bedrock.checkRequest!(undefined, '', `model/${MODEL}/invoke`)).toThrow(/use Converse/);
    expect(() => bedrock.checkRequest!(undefined, '', `model/${MODEL}/invoke-with-response-stream`)).toThrow(/use Converse/);
    expect(() => bedrock.checkRequest!('converse', '', `model/${MODEL}/converse`)).not.toThrow();
    expect(() => bedrock.checkRequest!(undefined, '', 'model/x/other')).not.toThrow();
    expect(bedrock.freeEndpointFor('POST', 'model/arn:aws:bedrock:us-east-1:1:inference-profile/us.x/count-tokens')).toEqual({
      kind: 'model',
      model: 'arn:aws:bedrock:us-east-1:1:inference-profile/us.x',
    });
    expect(protocolOf('anthropic').freeEndpointFor('POST', 'v1/messages/count_tokens')).toEqual({ kind: 'count_tokens' });
  });

  it('reads the model from the path, percent-decoded (an ARN its %2F too)', () => {
    expect(modelInPath(PATH)).toBe(MODEL);
    expect(bedrock.routeModel!(`model/${MODEL}/converse`)).toBe(MODEL);
    expect(modelInPath('model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/converse')).toBe(
      'arn:aws:bedrock:us-east-1:1:inference-profile/us.x',
    );
    // Sent with its slashes as they are, an ARN is the same model.
    expect(modelInPath('model/arn:aws:bedrock:us-east-1:1:inference-profile/us.x/converse')).toBe(
      'arn:aws:bedrock:us-east-1:1:inference-profile/us.x',
    );
    expect(modelInPath('converse')).toBeUndefined();
  });

  it('Converse usage: cache reads and writes are input, reads are cached, writes counted apart too; anything else is no usage', () => {
    expect(converseUsage({ inputTokens: 5, outputTokens: 2, cacheReadInputTokens: 3, cacheWriteInputTokens: 4 })).toEqual({
      inputTokens: 12n,
      cachedInputTokens: 3n,
      outputTokens: 2n,
      cacheWriteTokens: 4n,
    });
    expect(converseUsage({ outputTokens: 2 })).toBeNull();
    expect(converseUsage(null)).toBeNull();
    expect(usageFromJson(converse, '{"output":{},"usage":{"inputTokens":4,"outputTokens":1,"totalTokens":5}}').usage).toEqual({
      inputTokens: 4n,
      cachedInputTokens: 0n,
      outputTokens: 1n,
    });
  });

  it('prepares a call: the model of the path, a stream by its path, the cap inferenceConfig.maxTokens set, clamped or refused', () => {
    const clamp = { maxOutputTokens: 100, clamp: true };
    const none = prepareCall(stream, Buffer.from('{"messages":[]}'), clamp, MODEL);
    expect(none).toMatchObject({ requestedModel: MODEL, stream: true, outputBound: 100n });
    expect(JSON.parse(none.body.toString())).toEqual({ messages: [], inferenceConfig: { maxTokens: 100 } });
    const high = prepareCall(converse, Buffer.from('{"inferenceConfig":{"maxTokens":5000,"temperature":0.5}}'), clamp, MODEL);
    expect(high).toMatchObject({ stream: false, outputBound: 100n, outputCap: { sent: 100, requested: 5000 } });
    expect(JSON.parse(high.body.toString()).inferenceConfig).toEqual({ maxTokens: 100, temperature: 0.5 });
    const within = Buffer.from('{"inferenceConfig":{"maxTokens":7}}');
    expect(prepareCall(converse, within, clamp, MODEL).body).toBe(within);
    expect(() =>
      prepareCall(converse, Buffer.from('{"inferenceConfig":{"maxTokens":101}}'), { maxOutputTokens: 100, clamp: false }, MODEL),
    ).toThrow(/inferenceConfig.maxTokens may be at most 100/);
    expect(() => prepareCall(converse, Buffer.from('{"inferenceConfig":[1]}'), clamp, MODEL)).toThrow(/inferenceConfig must be an object/);
    expect(() => prepareCall(converse, Buffer.from('{"inferenceConfig":{"maxTokens":0}}'), clamp, MODEL)).toThrow(/at least 1/);
  });

  it("an inline image's base64 bytes count to their image bound, not byte for byte", () => {
    const bytes = 'A'.repeat(200_000);
    const body = Buffer.from(
      JSON.stringify({
        messages: [{ role: 'user', content: [{ image: { format: 'png', source: { bytes } } }] }],
        inferenceConfig: { maxTokens: 1 },
      }),
    );
    const p = prepareCall(converse, body, { maxOutputTokens: 100, clamp: true }, MODEL);
    expect(p.inputBound).toBeLessThan(BigInt(body.length - 100_000));
  });
});

describe("a Converse request's input estimate (bedrockInput)", () => {
  const TEXT = 'The quick brown fox jumps over the lazy dog, and the gateway counts what the model reads. '.repeat(40);
  const tallyOf = (body: Record<string, unknown>, model = MODEL) => {
    const tally = new InputTally(protocolOf('bedrock').inlineImage);
    bedrockInput(body, tally, model);
    return tally;
  };

  it('counts the text of messages, system, tool definitions and tool results; parameters add nothing', () => {
    const body = {
      system: [{ text: TEXT }],
      messages: [
        { role: 'user', content: [{ text: TEXT }] },
        { role: 'assistant', content: [{ toolUse: { toolUseId: 't1', name: 'lookup', input: { q: TEXT } } }] },
        { role: 'user', content: [{ toolResult: { toolUseId: 't1', content: [{ text: TEXT }, { json: { answer: TEXT } }] } }] },
      ],
      toolConfig: { tools: [{ toolSpec: { name: 'lookup', description: TEXT, inputSchema: { json: { type: 'object' } } } }] },
      inferenceConfig: { maxTokens: 100, temperature: 0.2 },
    };
    const tally = tallyOf(body, 'meta.llama3-70b-instruct-v1:0');
    // Six copies of the text are read as text (o200k's count of it each), none counted byte for byte.
    expect(tally.textTokens).toBeGreaterThanOrEqual(6 * countTokens(TEXT));
    expect(tally.bytes).toBeLessThan(100);
    // The margin (FOREIGN): twice the count, never above the text's bytes, well under the body's bytes.
    const bound = tally.bound(FOREIGN);
    expect(bound).toBeGreaterThanOrEqual(FOREIGN_FACTOR * tally.textTokens);
    expect(bound).toBeLessThan(JSON.stringify(body).length);
    expect(converse.input(body, new InputTally(() => undefined), MODEL)).toBe(FOREIGN);
  });

  it("a document's and a video's bytes count byte for byte; an image at most its bound", () => {
    const bytes = Buffer.from('%PDF-1.7 '.repeat(2000)).toString('base64');
    const doc = tallyOf({ messages: [{ role: 'user', content: [{ document: { format: 'pdf', name: 'a', source: { bytes } } }] }] });
    expect(doc.bytes).toBeGreaterThanOrEqual(bytes.length);
    expect(doc.textBytes).toBeLessThan(100);
    const video = tallyOf({ messages: [{ role: 'user', content: [{ video: { format: 'mp4', source: { bytes } } }] }] });
    expect(video.bytes).toBeGreaterThanOrEqual(bytes.length);
    const image = tallyOf({ messages: [{ role: 'user', content: [{ image: { format: 'png', source: { bytes } } }] }] });
    expect(image.bytes).toBe(bytes.length);
    expect(image.textBytes).toBeLessThan(100);
  });

  it("an Anthropic model with tools adds Anthropic's tool-use system prompt; another model does not", () => {
    const body = { messages: [], toolConfig: { tools: [{ toolSpec: { name: 'x', inputSchema: { json: {} } } }] } };
    const claude = tallyOf(body, 'us.anthropic.claude-3-5-haiku-20241022-v1:0').overhead;
    const llama = tallyOf(body, 'meta.llama3-70b-instruct-v1:0').overhead;
    expect(claude - llama).toBe(ANTHROPIC_TOOLS_TOKENS);
    expect(tallyOf({ messages: [] }, MODEL).overhead).toBe(tallyOf({ messages: [] }, 'meta.llama3').overhead);
  });

  it('additionalModelRequestFields (each model family its own) counts its bytes', () => {
    const extra = { additionalModelRequestFields: { top_k: 200, note: TEXT } };
    expect(tallyOf(extra).bytes).toBeGreaterThanOrEqual(JSON.stringify(extra.additionalModelRequestFields).length);
  });
});

describe("the gateway's refusals on a bedrock connection", () => {
  it('name the exception the AWS SDK raises for their status, and for the cause where a status has two', () => {
    expect(awsErrorType(400)).toBe('ValidationException');
    expect(awsErrorType(413)).toBe('ValidationException');
    expect(awsErrorType(401)).toBe('AccessDeniedException');
    expect(awsErrorType(403)).toBe('AccessDeniedException');
    expect(awsErrorType(404)).toBe('ResourceNotFoundException');
    expect(awsErrorType(409)).toBe('ConflictException');
    expect(awsErrorType(429, 'rate_limited')).toBe('ThrottlingException');
    // The quota used up is not a throttle: it does not free in seconds.
    expect(awsErrorType(429, 'quota_insufficient')).toBe('ServiceQuotaExceededException');
    expect(awsErrorType(500)).toBe('InternalServerException');
    expect(awsErrorType(502)).toBe('ServiceUnavailableException');
    expect(awsErrorType(503)).toBe('ServiceUnavailableException');
  });

  it("carry `message` beside the shared body's fields", () => {
    const shared = { error: { message: 'no', type: 'invalid_request_error', code: 'invalid_parameter', request_id: 'r1' } };
    const shape = protocolOf('bedrock').errorShape!;
    expect(shape.body(shared)).toEqual({ message: 'no', ...shared });
    expect(shape.headers!(shared, 400)).toEqual({ 'x-amzn-errortype': 'ValidationException' });
    const quota = { error: { ...shared.error, type: 'quota_exceeded_error', code: 'quota_insufficient' } };
    expect(shape.headers!(quota, 429)).toEqual({ 'x-amzn-errortype': 'ServiceQuotaExceededException' });
    expect(shape.requestIdHeader).toBe('x-amzn-requestid');
  });
});

describe("a bedrock connection's secret", () => {
  const SIG = { region: 'eu-west-1', accessKeyId: 'AKIAEXAMPLE000000001', secretAccessKey: 'secret/key+example', sessionToken: 'tok' };

  it('seals an API key or an access key with the region; keeps the stored region when none is given', () => {
    const apiKey = connectionSecret('bedrock', 'bedrock-api-key-1', { awsRegion: 'us-east-1' });
    expect(parseBedrockSecret(apiKey)).toEqual({ region: 'us-east-1', apiKey: 'bedrock-api-key-1' });
    const sig = connectionSecret('bedrock', SIG.secretAccessKey, {
      awsRegion: SIG.region,
      awsAccessKeyId: SIG.accessKeyId,
      awsSessionToken: 'tok',
    });
    expect(parseBedrockSecret(sig)).toEqual(SIG);
    expect(bedrockPreviewSource(parseBedrockSecret(sig))).toBe(SIG.accessKeyId);
    expect(parseBedrockSecret(connectionSecret('bedrock', 'k2-k2-k2-k2', {}, () => sig))).toEqual({
      region: SIG.region,
      apiKey: 'k2-k2-k2-k2',
    });
    expect(connectionSecret('openai', 'sk-plain', {})).toBe('sk-plain');
  });

  it.each([
    ['bedrock', {}, 'awsRegion'],
    ['bedrock', { awsRegion: 'us-east-1', awsSessionToken: 't' }, 'awsAccessKeyId'],
    ['openai', { awsRegion: 'us-east-1' }, 'awsRegion'],
    ['anthropic', { awsAccessKeyId: 'AKIAEXAMPLE000000001' }, 'awsAccessKeyId'],
  ] as const)('%s with %o is refused naming %s', (profile, fields, param) => {
    expect(() => connectionSecret(profile, 'key-key-key', fields)).toThrow(
      expect.objectContaining({ code: 'invalid_parameter', extras: { param } }),
    );
  });

  it('a stored text that is not a Bedrock credential does not parse', () => {
    expect(() => parseBedrockSecret('sk-plain')).toThrow(/not a Bedrock credential/);
    expect(() => parseBedrockSecret('{"apiKey":"x"}')).toThrow(/not a Bedrock credential/);
  });

  it('an API key goes as Bearer; an access key signs with SigV4, a signature that AWS signer recomputes', async () => {
    const url = new URL('https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude%3A0/converse?a=1');
    const body = Buffer.from('{"messages":[]}');
    expect(
      await bedrockAuthHeaders({ region: 'x', apiKey: 'abc' }, { method: 'POST', url, contentType: 'application/json', body }),
    ).toEqual({
      authorization: 'Bearer abc',
    });
    const headers = await bedrockAuthHeaders(SIG, { method: 'POST', url, contentType: 'application/json', body });
    expect(headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE000000001\/\d{8}\/eu-west-1\/bedrock\/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$/,
    );
    expect(headers['x-amz-security-token']).toBe('tok');
    const date = headers['x-amz-date']!;
    const verifier = new SignatureV4({ service: 'bedrock', region: SIG.region, credentials: SIG, sha256: Sha256 });
    const again = await verifier.sign(
      {
        method: 'POST',
        protocol: 'https:',
        hostname: url.hostname,
        path: url.pathname,
        query: { a: '1' },
        headers: { host: url.host, 'content-type': 'application/json', 'x-amz-content-sha256': headers['x-amz-content-sha256']! },
        body,
      },
      { signingDate: new Date(date.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z')) },
    );
    expect(again.headers.authorization).toBe(headers.authorization);
  });
});

describe('the gateway path of a Bedrock ARN', () => {
  const ID = '5f0c6d2e-8a1b-4c3d-9e4f-0a1b2c3d4e5f';

  it('an ARN segment may hold encoded slashes: its route reads them as slashes', () => {
    const target = parseGatewayUrl(`/providers/${ID}/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/converse`);
    expect(target.route).toBe('model/arn:aws:bedrock:us-east-1:1:inference-profile/us.x/converse');
    expect(target.providerPath).toBe('model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/converse');
    // The rule is Bedrock's: the path so read is taken on a Bedrock connection only.
    expect(target.slashesReadBy).toBe('bedrock');
    expect(() => checkSlashesFor(target, 'bedrock')).not.toThrow();
    for (const profile of ['openai', 'anthropic', 'azure-openai', 'gemini'] as const) {
      expect(() => checkSlashesFor(target, profile), profile).toThrow(/encoded slash/);
    }
    // An ARN without an encoded slash, or any other path, needs no rule: every connection takes it.
    for (const path of ['model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Afoundation-model/converse', 'v1/chat/completions']) {
      const plain = parseGatewayUrl(`/providers/${ID}/${path}`);
      expect(plain.slashesReadBy, path).toBeUndefined();
      expect(() => checkSlashesFor(plain, 'openai')).not.toThrow();
    }
  });

  it.each([
    'model/arn%3Ax%2F..%2Fadmin/converse',
    'model/not-an-arn%2Fx/converse',
    'v1/arn%3Ax%2Fy/chat/completions',
    'model/arn%3Ax/y%2Fz/converse',
  ])('anything else with an encoded slash is refused: %s', (path) => {
    expect(() => parseGatewayUrl(`/providers/${ID}/${path}`)).toThrow(/encoded slash|dot segment/);
  });
});
