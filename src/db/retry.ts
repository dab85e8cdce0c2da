/** The gateway's after-the-answer writes retry with this backoff before they give up. */
const DELAYS_MS = [50, 250, 1000, 4000];

/** Runs `write` until it succeeds or the backoff is spent; then rethrows its last error. */
export async function withRetries(write: () => Promise<void>): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      return await write();
    } catch (err) {
      if (i >= DELAYS_MS.length) throw err;
      await new Promise((r) => setTimeout(r, DELAYS_MS[i]));
    }
  }
}
