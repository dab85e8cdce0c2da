/**
 * A batch's input file read line by line (src/batches/batch-lines.ts): the bound of good lines, and each kind of
 * bad line refused naming it, whether the file is known to be a batch's before its bytes (strict) or after (kept).
 */
import { describe, expect, it } from 'vitest';
import { compileModelPolicy } from '../../src/domain/quota/model-pricing.js';
import { BatchLines } from '../../src/batches/batch-lines.js';
import { AppError } from '../../src/errors.js';
import { protocolOf } from '../../src/protocols/index.js';

const policy = compileModelPolicy(
  { inputMultiplierPpm: 1_000_000n, cachedInputMultiplierPpm: 500_000n, outputMultiplierPpm: 2_000_000n },
  [],
  ['gpt-4o-mini', 'text-embedding-3-small'],
);
const rules = { protocol: protocolOf('openai'), maxOutputTokens: 20, policy };
const line = (i: number, body: Record<string, unknown> = {}, url = '/v1/chat/completions') =>
  JSON.stringify({
    custom_id: `r${i}`,
    method: 'POST',
    url,
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20, ...body },
  });

/** The file's bytes pushed in pieces of `size`, as a stream would give them. */
function read(text: string, strict: boolean, size = 7) {
  const lines = new BatchLines(rules, strict);
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) lines.push(bytes.subarray(at, at + size));
  return lines.end();
}

const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err as AppError;
  }
  throw new Error('not refused');
};

describe('a batch file read line by line', () => {
  it("holds no line longer than 16 MiB: a file without line breaks (not a batch's) stops being read", () => {
    const lines = new BatchLines(rules, false);
    const chunk = Buffer.alloc(1024 * 1024, 0x41);
    for (let i = 0; i < 40; i++) lines.push(chunk);
    expect(lines.refusal?.message).toBe('line 1: longer than 16 MiB');
  });

  it('counts the lines and sums their bounds, whatever the pieces they come in', () => {
    const text = [line(0), line(1), line(2, { input: 'x' }, '/v1/embeddings')].join('\n') + '\n';
    const whole = read(text, true, 1 << 20);
    expect(whole.requests).toBe(3);
    expect(read(text, true, 3)).toEqual(whole);
    expect(Object.keys(whole.pricing).sort()).toEqual(['gpt-4o-mini']);
    expect(whole.units).toBeGreaterThan(3n * 40n);
  });

  it.each([
    [[line(0), '{oops'], 'line 2: not JSON'],
    [[line(0, { model: 'gpt-4o' })], "line 1: the model 'gpt-4o' is not allowed on this plan"],
    [[line(0, { max_tokens: 21 })], 'line 1: max_tokens may be at most 20 on this plan'],
    [[line(0, { max_tokens: undefined })], 'line 1: the request names no output cap'],
    [[line(0, { stream: true })], 'line 1: a batch request cannot stream'],
    [[line(0, {}, '/v1/images/generations')], "line 1: url '/v1/images/generations' is not an endpoint"],
    [[JSON.stringify({ custom_id: 'a', method: 'GET', url: '/v1/chat/completions', body: {} })], 'line 1: method must be POST'],
  ])('refuses %j: %s', (lines, message) => {
    for (const strict of [true, false]) {
      const err = refusal(() => read(lines.join('\n'), strict));
      expect(err).toBeInstanceOf(AppError);
      expect(err.message).toContain(message);
      expect(err.status).toBe(400);
    }
  });
});
