/**
 * The input estimate (src/protocols/input-estimate.ts) against the tokenizers of OpenAI's models over the
 * corpus of test/fixtures/input-corpus.ts: the bound a call is admitted at is never below what the model
 * counts, and never above the body's bytes.
 */
import { describe, expect, it } from 'vitest';
import * as gpt4 from 'gpt-tokenizer/model/gpt-4';
import * as gpt4o from 'gpt-tokenizer/model/gpt-4o';
import o200kEncoding from 'gpt-tokenizer/encoding/o200k_base';
import { BASE_TOKENS, FOREIGN, FOREIGN_FACTOR, InputTally, MERGE_BUDGET, TOKENIZE_BUDGET } from '../../src/protocols/input-estimate.js';
import { isToken, mergedTokens, VOCABULARY_SIZE } from '../../src/protocols/o200k-vocabulary.js';
import { ANTHROPIC_TOOLS_TOKENS } from '../../src/protocols/anthropic.js';
import { geminiInput } from '../../src/protocols/gemini.js';
import { openAiRule } from '../../src/protocols/openai.js';
import { inspectorFor, prepareCall } from '../../src/protocols/inspectors.js';
import { corpus } from '../fixtures/input-corpus.js';
import { prng } from '../support/prng.js';

const CAPS = { maxOutputTokens: 100, clamp: true };
const AS_TEXT = { disallowedSpecial: new Set<string>() };
/** gpt-tokenizer's o200k count of `text`, special-token strings counted as text: what the estimate's count must equal. */
const o200kTokens = (text: string) => (text ? gpt4o.countTokens(text, AS_TEXT) : 0);
type Message = { role: 'system' | 'user' | 'assistant'; content: string };

const inspector = (profile: 'openai' | 'anthropic', path: string) => inspectorFor(profile, 'POST', path)!;
const chat = inspector('openai', 'v1/chat/completions');
const completions = inspector('openai', 'v1/completions');
const embeddings = inspector('openai', 'v1/embeddings');
const responses = inspector('openai', 'v1/responses');
const messages = inspector('anthropic', 'v1/messages');

/** The input bound of `body` on `inspector`, and the body's bytes. */
function bound(on: typeof chat, body: Record<string, unknown>): { bound: number; bytes: number } {
  const raw = Buffer.from(JSON.stringify(body));
  return { bound: Number(prepareCall(on, raw, CAPS).inputBound), bytes: raw.length };
}

const conversation = (text: string): Message[] => [
  { role: 'system', content: 'You are a careful assistant. Answer briefly.' },
  { role: 'user', content: text },
  { role: 'assistant', content: 'Understood. What should I do with it?' },
  { role: 'user', content: 'Summarise it in two sentences.' },
];

/** What the model's chat template makes of the messages (gpt-tokenizer's chat encoding, the reply primed). */
const chatTokens = (encoder: Pick<typeof gpt4o, 'encodeChat'>, model: string, chatMessages: Message[]) =>
  encoder.encodeChat(chatMessages, model as never, AS_TEXT).length;

describe('input bound over the corpus, OpenAI models', () => {
  for (const { kind, text } of corpus()) {
    it(`${kind}: chat, responses, completions and embeddings are bounded above by o200k models' counts`, () => {
      const turns = conversation(text);
      const actualChat = chatTokens(gpt4o, 'gpt-4o', turns);
      const c = bound(chat, { model: 'gpt-4o', messages: turns, max_tokens: 10 });
      expect(c.bound, `${kind} chat`).toBeGreaterThanOrEqual(actualChat);
      expect(c.bound).toBeLessThanOrEqual(c.bytes);

      const r = bound(responses, { model: 'gpt-4.1', instructions: turns[0]!.content, input: turns.slice(1) });
      expect(r.bound, `${kind} responses`).toBeGreaterThanOrEqual(actualChat);

      const actualText = gpt4o.countTokens(text, AS_TEXT);
      expect(bound(completions, { model: 'gpt-4o', prompt: text }).bound).toBeGreaterThanOrEqual(actualText);
      expect(bound(embeddings, { model: 'gpt-5', input: [text, text] }).bound).toBeGreaterThanOrEqual(2 * actualText);
    });

    it(`${kind}: cl100k models (gpt-4, text-embedding-3) are bounded by the margin`, () => {
      const turns = conversation(text);
      const c = bound(chat, { model: 'gpt-4-turbo', messages: turns });
      expect(c.bound, `${kind} gpt-4 chat`).toBeGreaterThanOrEqual(chatTokens(gpt4, 'gpt-4', turns));
      const e = bound(embeddings, { model: 'text-embedding-3-small', input: text });
      expect(e.bound, `${kind} embeddings`).toBeGreaterThanOrEqual(gpt4.countTokens(text, AS_TEXT));
    });
  }

  it('English is bounded within 1.5 times its count on o200k models', () => {
    const text = corpus().find((s) => s.kind === 'english')!.text;
    const turns = conversation(text);
    const ratio = bound(chat, { model: 'gpt-4o-mini', messages: turns }).bound / chatTokens(gpt4o, 'gpt-4o', turns);
    expect(ratio).toBeGreaterThanOrEqual(1);
    expect(ratio).toBeLessThanOrEqual(1.5);
  });

  it('function definitions and calls are bounded above by the count of their rendering', () => {
    const functions = [
      {
        name: 'get_weather',
        description: 'Get the current weather for a city, in the unit asked for.',
        parameters: {
          type: 'object' as const,
          properties: {
            city: { type: 'string' as const, description: 'The city, e.g. Paris' },
            unit: { type: 'string' as const, enum: ['celsius', 'fahrenheit'] },
            days: { type: 'integer' as const, description: 'How many days of forecast' },
          },
          required: ['city'],
        },
      },
    ];
    const turns = [
      { role: 'user' as const, content: 'What is the weather in Paris and in Tokyo?' },
      { role: 'assistant' as const, content: '', function_call: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      { role: 'function' as const, name: 'get_weather', content: '{"temperature":21,"unit":"celsius"}' },
    ];
    // gpt-tokenizer's rendering of functions as OpenAI counts them (a TypeScript namespace in the system message).
    const actual = gpt4o.countChatCompletionTokens!({ messages: turns, functions });
    expect(actual).toBeGreaterThan(50);
    const b = bound(chat, { model: 'gpt-4o', messages: turns, functions });
    expect(b.bound).toBeGreaterThanOrEqual(actual);
    expect(b.bound / actual).toBeLessThan(3);
    // The same definitions as tools are walked alike.
    const tools = functions.map((f) => ({ type: 'function', function: f }));
    expect(bound(chat, { model: 'gpt-4o', messages: turns, tools }).bound).toBeGreaterThanOrEqual(actual);
  });
});

/** The tally's count of `texts`, one request. */
function counted(...texts: string[]): number {
  const tally = new InputTally(() => undefined);
  for (const text of texts) tally.text(text);
  return tally.textTokens;
}

// Thousands of random texts, each counted twice: more than the default 5 s on a loaded host.
/** The corpus but its whitespace run, 999 spaces: a piece longer than the count merges, which counts its bytes. */
const merged = () => corpus().filter((s) => s.kind !== 'whitespace');

describe('the piecewise count', { timeout: 60_000 }, () => {
  it("holds gpt-tokenizer's o200k vocabulary: every token of it, and its merge of pieces outside it", () => {
    const decoder = (o200kEncoding as unknown as { bytePairEncodingCoreProcessor: { bytePairRankDecoder: (string | number[])[] } })
      .bytePairEncodingCoreProcessor.bytePairRankDecoder;
    let tokens = 0;
    for (const token of decoder) {
      if (token === undefined) continue;
      tokens++;
      if (typeof token === 'string' && !isToken(token)) expect.fail(`${JSON.stringify(token)} is a token of o200k`);
    }
    expect(VOCABULARY_SIZE).toBe(tokens);
    for (const piece of ['unbelievablenessly', ' Pneumonoultramicroscopic', '网关ゲート게이트', '🙂👍🏽', 'x'.repeat(200), '\ud83d']) {
      expect(mergedTokens(piece), piece).toBe(o200kTokens(piece));
    }
  });

  it("equals gpt-tokenizer's count on the corpus and on random text of every script", () => {
    for (const { kind, text } of merged()) expect(counted(text), kind).toBe(o200kTokens(text));
    // A fixed seed: the same strings each run.
    let seed = 2026;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const alphabet = [...'aAbZz09 \'\t\n\r/.,!?-_"sStTlLvVeErRdDmM  \n\néü网关ゲート게이트🙂👍🏽<|endoftext|>ℕ²'];
    for (let i = 0; i < 3000; i++) {
      let text = '';
      for (let n = 1 + Math.floor(next() * 60); n > 0; n--) text += alphabet[Math.floor(next() * alphabet.length)];
      expect(counted(text), JSON.stringify(text)).toBe(o200kTokens(text));
    }
  });

  it('counts text it has seen before alike: short pieces are found again by their characters, not their hash alone', () => {
    for (const { kind, text } of merged()) expect(counted(text, text), kind).toBe(2 * o200kTokens(text));
    // Two words of different counts whose FNV-1a hash (the short-piece table's) is the same: each is counted as itself.
    const fnv = (text: string) => {
      let hash = 0x811c9dc5;
      for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
      return hash;
    };
    const next = prng(32);
    const seen = new Map<number, string>();
    let pair: [string, string] | undefined;
    while (!pair) {
      const word = Array.from({ length: 7 }, () => String.fromCharCode(97 + Math.floor(next() * 26))).join('');
      const other = seen.get(fnv(word));
      if (other !== undefined && o200kTokens(other) !== o200kTokens(word)) pair = [other, word];
      else seen.set(fnv(word), word);
    }
    const [a, b] = pair;
    for (const text of [a, b, a, `${b} ${a}`, b]) expect(counted(text), text).toBe(o200kTokens(text));
  });

  it('past its merge budget a request counts the rest of its unknown pieces by their bytes: still above the count', () => {
    // Random base64 is mostly pieces outside the vocabulary, each new: far more than a request merges.
    let seed = 7;
    const bytes = Buffer.from(Array.from({ length: 48 * 1024 }, () => (seed = (seed * 1103515245 + 12345) % 2147483648) >>> 16));
    const text = bytes.toString('base64');
    const exact = o200kTokens(text);
    expect(text.length).toBeGreaterThan(MERGE_BUDGET);
    const bound = counted(text);
    expect(bound).toBeGreaterThan(exact);
    expect(bound).toBeLessThanOrEqual(text.length);
  });
});

describe('input estimate rules', () => {
  it('a special-token string in a prompt is text, as the API reads it', () => {
    expect(o200kTokens('<|endoftext|>')).toBeGreaterThan(1);
    expect(() => bound(chat, { model: 'gpt-4o', messages: [{ role: 'user', content: 'a <|im_start|> b' }] })).not.toThrow();
  });

  it('parameters add nothing; a field the endpoint does not list counts its bytes', () => {
    const base = { model: 'gpt-4o', messages: [{ role: 'user', content: 'Hello there' }] };
    const plain = bound(chat, base).bound;
    expect(bound(chat, { ...base, temperature: 0.2, top_p: 0.9, stop: ['x'], user: 'someone', seed: 7 }).bound).toBe(plain);
    const extra = { notes: 'x'.repeat(300) };
    expect(bound(chat, { ...base, extra }).bound).toBe(plain + Buffer.byteLength(JSON.stringify(extra)));
  });

  it('a prompt or input of token ids counts one token an id', () => {
    const ids = Array.from({ length: 500 }, (_, i) => 100_000 + i);
    const b = bound(completions, { model: 'gpt-4o', prompt: ids });
    expect(b.bound).toBeGreaterThanOrEqual(500);
    expect(b.bound).toBeLessThan(600);
    expect(bound(embeddings, { model: 'gpt-4o', input: [ids, ids] }).bound).toBeGreaterThanOrEqual(1000);
  });

  it('a model that is not an OpenAI o200k model gets the margin, never above the bytes', () => {
    const text = corpus().find((s) => s.kind === 'english')!.text;
    const body = (model: string) => ({ model, messages: [{ role: 'user', content: text }] });
    const own = bound(chat, body('gpt-4o')).bound;
    const other = bound(chat, body('meta-llama/Llama-3.1-8B'));
    const count = o200kTokens(text);
    expect(other.bound - own).toBeGreaterThanOrEqual((FOREIGN_FACTOR - 1) * count - 1);
    expect(other.bound).toBeLessThanOrEqual(other.bytes);
    // CJK: twice the count would pass the bytes, which bound any byte-level tokenizer.
    const cjkText = corpus().find((s) => s.kind === 'cjk')!.text;
    const cjk = bound(chat, { model: 'meta-llama/Llama-3.1-8B', messages: [{ role: 'user', content: cjkText }] });
    expect(cjk.bound).toBeGreaterThanOrEqual(FOREIGN_FACTOR * o200kTokens(cjkText));
    expect(cjk.bound).toBeLessThanOrEqual(cjk.bytes);
    // Base64: twice its count passes its bytes, which bound any byte-level tokenizer: the text counts its bytes.
    const b64Text = corpus().find((s) => s.kind === 'base64')!.text;
    expect(FOREIGN_FACTOR * o200kTokens(b64Text)).toBeGreaterThan(b64Text.length);
    const own64 = bound(chat, { model: 'gpt-4o', messages: [{ role: 'user', content: b64Text }] }).bound;
    const other64 = bound(chat, { model: 'meta-llama/Llama-3.1-8B', messages: [{ role: 'user', content: b64Text }] }).bound;
    // The sample at its bytes rather than its count (the keys and model name around it, a few more).
    expect(other64 - own64).toBeGreaterThanOrEqual(b64Text.length - o200kTokens(b64Text));
    expect(other64 - own64).toBeLessThan(b64Text.length - o200kTokens(b64Text) + 20);
  });

  it('anthropic: system, messages and tools are counted with the margin; tools add the tool-use system prompt', () => {
    const text = corpus().find((s) => s.kind === 'english')!.text;
    const count = o200kTokens(text);
    const plain = bound(messages, {
      model: 'claude-sonnet-4-5',
      max_tokens: 10,
      system: text,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(plain.bound).toBeGreaterThanOrEqual(FOREIGN_FACTOR * count);
    expect(plain.bound).toBeLessThan(plain.bytes);
    const tool = {
      name: 'lookup',
      description: 'Look a word up',
      input_schema: { type: 'object', properties: { word: { type: 'string' } } },
    };
    const withTools = bound(messages, {
      model: 'claude-sonnet-4-5',
      max_tokens: 10,
      system: text,
      messages: [{ role: 'user', content: 'Hi' }],
      tools: [tool],
    });
    expect(withTools.bound - plain.bound).toBeGreaterThan(ANTHROPIC_TOOLS_TOKENS);
  });

  it('text beyond the tokenizing budget is bounded by its bytes', () => {
    const text = 'word '.repeat(Math.ceil((TOKENIZE_BUDGET * 1.5) / 5));
    const b = bound(chat, { model: 'gpt-4o', messages: [{ role: 'user', content: text }] });
    expect(b.bound).toBeLessThanOrEqual(b.bytes);
    expect(b.bound).toBeGreaterThan(Buffer.byteLength(text) - TOKENIZE_BUDGET);
  });
});

describe("input bound over the corpus, Gemini (Gemma 3's counts)", () => {
  /** The bound of `text` alone (no structure) by `rule`. */
  const textBound = (text: string, rule = FOREIGN) => {
    const tally = new InputTally(() => undefined);
    tally.text(text);
    return tally.bound(rule) - BASE_TOKENS;
  };

  for (const { kind, text, gemma } of corpus()) {
    it(`${kind}: a Gemini call's bound is at least Gemma 3's count, and at most the text's bytes`, () => {
      const bound = textBound(text);
      expect(bound / gemma, kind).toBeGreaterThanOrEqual(1);
      expect(bound).toBeLessThanOrEqual(Buffer.byteLength(text));
      // A generateContent request carrying it, as the gemini protocol walks it.
      const tally = new InputTally(() => undefined);
      geminiInput({ contents: [{ role: 'user', parts: [{ text }] }] }, tally);
      expect(tally.bound(FOREIGN)).toBeGreaterThanOrEqual(gemma);
    });
  }

  // A fixed amount of work (about a second alone): its timeout only allows for a loaded host.
  it('counts each digit, and each character of a long whitespace run, a token at least, whatever the text around them', () => {
    const next = prng(29);
    const pick = (chars: string) => chars[Math.floor(next() * chars.length)]!;
    for (let i = 0; i < 2000; i++) {
      let text = '';
      let floor = 0;
      for (let n = 1 + Math.floor(next() * 40); n > 0; n--) {
        const r = next();
        if (r < 0.4) {
          const digits = 1 + Math.floor(next() * 12);
          for (let d = 0; d < digits; d++) text += pick('0123456789');
          floor += digits;
        } else if (r < 0.6) {
          // A run of up to 300 spaces, tabs and newlines: past 32, a token a character.
          const run = 1 + Math.floor(next() * 300);
          for (let w = 0; w < run; w++) text += pick('     \t\n');
          if (run > 32) floor += run;
        } else {
          text += pick(i % 2 ? 'abcXYZ' : '.,-_/"{}');
        }
      }
      // A run that meets another (two picks in a row) is only longer: still a token a character.
      expect(textBound(text), JSON.stringify(text)).toBeGreaterThanOrEqual(floor);
    }
  }, 30_000);

  it("keeps an o200k model's count: digits and whitespace add nothing", () => {
    for (const { kind, text } of merged()) expect(textBound(text, openAiRule('gpt-4o')), kind).toBe(o200kTokens(text));
    const run = corpus().find((s) => s.kind === 'whitespace')!.text;
    // 'a', the run of 999 spaces at its bytes (a piece too long to merge), ' b'.
    expect(textBound(run, openAiRule('gpt-4o'))).toBe(1 + 999 + 1);
  });
});
