/**
 * A session of Gemini's Live API (`BidiGenerateContent`, docs/realtime.md): what its messages mean to the session's
 * machinery (realtime-session.ts); gemini-events.ts reads them.
 *
 * - The model comes in the client's first message, its `setup`: allowed by the access's strategy there (else the
 *   session closes 1008), a route target's model map applied, and, under a plan's maxOutputTokens, sent with its
 *   `generationConfig.maxOutputTokens` at most the plan's, so every turn, whoever starts it, stops there.
 * - A turn is asked for by a `clientContent` with `turnComplete: true` (or, under manual activity detection, a
 *   `realtimeInput.activityEnd`): admitted before it is sent. A turn the provider's voice activity detection starts
 *   (its first output with no turn asked) is admitted as it runs.
 * - A turn ends at `serverContent.turnComplete`, settled from its `usageMetadata` (that message's, else the last one
 *   seen during the turn, else the next message's if it carries only usage); none: charged as delivered.
 * - The Live API has no message that refuses a turn and keeps the session: a refused turn is not sent upstream and
 *   the session closes 1008, its reason naming the refusal, once the turn in flight has completed. A refused turn
 *   the provider started cannot be stopped: it is charged what it uses, and the session closes when it completes.
 */
import type { RawData } from 'ws';
import { toAppError, type AppError } from '../errors.js';
import type { Usage } from '../protocols/usage.js';
import { assertModelAllowed } from '../gateway/admission.js';
import {
  asksForTurn,
  carriesContent,
  endsOrCounts,
  HEAD_BYTES,
  liveUsage,
  messageKey,
  outputOf,
  parseMessage,
  partOf,
  refusalReason,
  setupCap,
  setupFirst,
  setupMessage,
  setupModel,
  SMALL_FRAME,
  turnComplete,
} from './gemini-events.js';
import { bytesOf, RealtimeSession } from './realtime-session.js';

export class GeminiSession extends RealtimeSession {
  /** Its `setup` was allowed and sent upstream. */
  private setUp = false;
  /** The last usage the running turn reported. */
  private usage: Usage | null = null;
  /** The latest turn completed without its usage: the next message settles it (with its usage, if it carries only that). */
  private awaiting = false;

  /** The Live API has no message for it: the close says why. */
  protected notify(): void {}

  /** Nothing can tell the client and keep the session: it closes (1008) once no turn is in flight. */
  protected refusal(): boolean {
    return false;
  }

  protected override closeReason(err: AppError): string {
    return refusalReason(err);
  }

  protected clientFrame(data: RawData, binary: boolean): void {
    const frame = bytesOf(data);
    const key = messageKey(frame.subarray(0, HEAD_BYTES).toString('utf8'));
    if (!this.setUp) return this.setup(key, frame);
    if (key === 'clientContent' || (key === 'realtimeInput' && frame.length <= SMALL_FRAME)) {
      if (asksForTurn(key, parseMessage(frame))) return this.askTurn(undefined, undefined, () => frame);
    }
    this.sendUpstream(data, binary);
  }

  /** The session's first message: its model allowed and mapped, its output cap within the plan's; else it closes 1008. */
  private setup(key: string, frame: Buffer): void {
    const setup = key === 'setup' ? partOf(parseMessage(frame), 'setup') : undefined;
    if (!setup) return this.refuse(setupFirst());
    const { ctx, modelMap } = this.deps;
    // The session is recorded with the model its setup asked for, allowed or not.
    const model = (ctx.model = setupModel(setup));
    try {
      assertModelAllowed(ctx.meter.modelPolicy(ctx.auth), model);
    } catch (err) {
      return this.refuse(toAppError(err));
    }
    const max = ctx.auth.max_output_tokens;
    const asked = setupCap(setup);
    this.cap = max && (asked === undefined || asked > max) ? max : asked;
    this.setUp = true;
    this.sendUpstream(setupMessage(setup, modelMap?.[model] ?? model, this.cap));
  }

  protected serverFrame(data: RawData, binary: boolean): void {
    const frame = bytesOf(data);
    const head = frame.subarray(0, HEAD_BYTES).toString('utf8');
    const message = endsOrCounts(frame) ? parseMessage(frame) : undefined;
    // The turn that completed without usage: this message's, if it carries only usage, else none.
    const late = this.awaiting && message && !carriesContent(message) ? liveUsage(message) : null;
    if (this.awaiting) {
      this.awaiting = false;
      this.endTurn(null, late, false);
      this.usage = null;
    }
    if (!late) {
      const { output, audio } = outputOf(messageKey(head), head);
      if (output) {
        if (!this.latest) this.began(null);
        this.output(audio);
      }
      if (message) this.read(message);
    }
    this.sendClient(data, binary);
  }

  /** A message that may report usage or end its turn. */
  private read(message: Record<string, unknown>): void {
    const usage = liveUsage(message);
    if (usage && this.latest) this.usage = usage;
    if (!turnComplete(message)) return;
    // A turn that ends with no output still began (and is charged what it reports).
    if (!this.latest) {
      this.began(null);
      this.usage = usage;
    }
    if (!this.usage) {
      this.awaiting = true;
      return;
    }
    this.endTurn(null, this.usage, false);
    this.usage = null;
  }
}
