/** The first wave's places (src/gateway/first-wave.ts), without I/O: who goes, who waits, who is refused. */
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { createFirstWave, type FirstWaveSlot } from '../../src/gateway/first-wave.js';

const settled = async <T>(p: T | Promise<T>) => {
  let done = false;
  let value: T | undefined;
  void Promise.resolve(p).then(
    (v) => ((done = true), (value = v)),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return { done, value };
};

describe('the first wave', () => {
  it('lets `limit` calls of an access go, and the others wait; an answer gives the model its history and lets them all go', async () => {
    const wave = createFirstWave({ limit: 2, waitMs: 60_000 });
    const first = wave.enter('a', 'c', 'm') as FirstWaveSlot;
    const second = wave.enter('a', 'c', 'm') as FirstWaveSlot;
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    const third = wave.enter('a', 'c', 'm');
    const fourth = wave.enter('a', 'c', 'm');
    expect(third).toBeInstanceOf(Promise);
    expect((await settled(third)).done).toBe(false);
    // Another access, another model, another connection: places of their own.
    expect(wave.enter('b', 'c', 'm')).toBeDefined();
    expect(wave.enter('a', 'c', 'm2')).toBeDefined();
    expect(wave.enter('a', 'c2', 'm')).toBeDefined();
    wave.leave(first, true);
    expect(await settled(third)).toEqual({ done: true, value: undefined });
    expect(await settled(fourth)).toEqual({ done: true, value: undefined });
    // History: not held any more, even past the limit.
    expect(wave.enter('a', 'c', 'm')).toBeUndefined();
    expect(wave.enter('z', 'c', 'm')).toBeUndefined();
    wave.leave(second, false);
  });

  it('gives the place of a call ended without usage to the next one waiting, in order', async () => {
    const wave = createFirstWave({ limit: 1, waitMs: 60_000 });
    const first = wave.enter('a', 'c', 'm') as FirstWaveSlot;
    const second = wave.enter('a', 'c', 'm');
    const third = wave.enter('a', 'c', 'm');
    wave.leave(first, false);
    const got = await settled(second);
    expect(got.done).toBe(true);
    expect(got.value).toBeDefined();
    expect((await settled(third)).done).toBe(false);
    wave.leave(got.value!, false);
    expect((await settled(third)).value).toBeDefined();
  });

  it('refuses a call that waited waitMs with 429 first_wave_limited, and the waiting calls when cut', async () => {
    const wave = createFirstWave({ limit: 1, waitMs: 20 });
    expect(wave.enter('a', 'c', 'm')).toBeDefined();
    const err = await (wave.enter('a', 'c', 'm') as Promise<unknown>).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'first_wave_limited', status: 429, extras: { retry_after: 1 } });
    const long = createFirstWave({ limit: 1, waitMs: 60_000 });
    expect(long.enter('a', 'c', 'm')).toBeDefined();
    const waiting = long.enter('a', 'c', 'm') as Promise<unknown>;
    long.cut();
    await expect(waiting).rejects.toMatchObject({ code: 'first_wave_limited' });
  });

  it('takes a bound learned on another process as history', async () => {
    const wave = createFirstWave({ limit: 1, waitMs: 60_000 });
    expect(wave.enter('a', 'c', 'm')).toBeDefined();
    const waiting = wave.enter('a', 'c', 'm');
    wave.learned('c', 'm');
    expect(await settled(waiting)).toEqual({ done: true, value: undefined });
    expect(wave.enter('a', 'c', 'm')).toBeUndefined();
  });
});
