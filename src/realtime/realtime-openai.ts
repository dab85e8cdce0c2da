/**
 * A session of OpenAI's (and Azure's) Realtime API (docs/realtime.md): what its events mean to the session's
 * machinery (realtime-session.ts).
 *
 * - A client's `response.create` asks for a turn: admitted before it is sent, and sent capped at its output bound
 *   under a plan's maxOutputTokens.
 * - `response.created` begins a turn (the client's asked, else a server-VAD turn); `response.done` ends it with its
 *   `usage`; text, audio and transcript deltas are its output.
 * - A refused turn gets an `error` event naming why (its `event_id` the refused `response.create`'s); one refused for
 *   tokens per minute leaves the session open. A refused server-VAD turn is cancelled (`response.cancel`).
 * - Under a plan's maxOutputTokens the session is opened at that cap (a `session.update` before any client frame),
 *   and a client's `session.update` past it is sent with the plan's.
 */
import type { RawData } from 'ws';
import type { AppError } from '../errors.js';
import {
  carriesAudio,
  carriesOutput,
  errorEvent,
  eventType,
  parseEvent,
  PARSED_SERVER_EVENTS,
  refusalEvent,
  responseCap,
  responseOf,
  sessionCap,
  usageOf,
  withCap,
} from './realtime-events.js';
import { bytesOf, RealtimeSession } from './realtime-session.js';
import type { Turn } from './realtime-turn.js';

/** The event id of the `session.update` Nexus opens a session with (the plan's output cap), and of its answer's error. */
const CAP_EVENT_ID = 'event_nexus_session_cap';
/** How many bytes of a frame are decoded to find its type (an audio delta is not decoded whole). */
const HEAD_BYTES = 200;

export class OpenAiSession extends RealtimeSession {
  /** Nexus's own `session.update` (the plan's cap) awaits its answer, which is not passed on to the client. */
  private capPending = false;

  /**
   * Under a plan's maxOutputTokens the session is opened with it as its output cap (a `session.update`, before any
   * client frame), so the turns the provider starts itself (server VAD, no `response.create`) stop there too.
   */
  protected override opening(): void {
    const max = this.deps.ctx.auth.max_output_tokens;
    if (!max) return;
    const session = this.deps.beta ? { max_response_output_tokens: max } : { type: 'realtime', max_output_tokens: max };
    this.sendUpstream(JSON.stringify({ type: 'session.update', event_id: CAP_EVENT_ID, session }));
    this.capPending = true;
  }

  protected notify(code: string, message: string): void {
    this.sendClient(errorEvent(code, message));
  }

  /** The client gets an `error` event; refused for the plan's tokens per minute, the session stays open. */
  protected refusal(err: AppError, eventId?: string): boolean {
    this.sendClient(refusalEvent(err, eventId));
    return err.code === 'rate_limited';
  }

  protected override cancel(turn: Turn): void {
    if (turn.responseId) this.sendUpstream(JSON.stringify({ type: 'response.cancel', response_id: turn.responseId }));
  }

  /** A client frame: a `response.create` is admitted first; a `session.update` is kept within the plan's cap. */
  protected clientFrame(data: RawData, binary: boolean): void {
    if (!binary) {
      const text = bytesOf(data);
      const type = eventType(text.subarray(0, HEAD_BYTES).toString('utf8'));
      if (type === 'response.create') {
        const event = parseEvent(text.toString('utf8')) ?? {};
        const eventId = typeof event.event_id === 'string' ? event.event_id : undefined;
        // Under a plan's maxOutputTokens the turn is sent capped at its output bound, so that bound holds upstream.
        const capped = this.deps.ctx.auth.max_output_tokens;
        this.askTurn(responseCap(event), eventId, (turn) =>
          capped ? withCap(event, 'response', Number(turn.outputBound), this.deps.beta) : text,
        );
        return;
      }
      if (type === 'session.update') data = Buffer.from(this.sessionUpdate(text));
    }
    this.sendUpstream(data, binary);
  }

  /**
   * A client's `session.update` that sets the session's output cap past the plan's maxOutputTokens (or to 'inf') is
   * sent with the plan's instead: the session's cap bounds its server-VAD turns, which no `response.create` asks for.
   */
  private sessionUpdate(frame: Buffer): Buffer | string {
    const max = this.deps.ctx.auth.max_output_tokens;
    const event = max ? parseEvent(frame.toString('utf8')) : undefined;
    const asked = event && sessionCap(event);
    if (!event || asked === undefined || (asked !== 'inf' && asked <= max!)) return frame;
    return withCap(event, 'session', max!, this.deps.beta);
  }

  protected serverFrame(data: RawData, binary: boolean): void {
    if (!binary) {
      const buf = bytesOf(data);
      const type = eventType(buf.subarray(0, HEAD_BYTES).toString('utf8'));
      if (carriesOutput(type)) this.output(carriesAudio(type));
      else if (PARSED_SERVER_EVENTS.has(type)) {
        const relayed = this.serverEvent(type, parseEvent(buf.toString('utf8')) ?? {});
        if (relayed === null) return;
        if (relayed !== undefined) data = Buffer.from(relayed);
      }
    }
    this.sendClient(data, binary);
  }

  /** A parsed server event read; returns the frame to relay in its place (undefined: as it came; null: none). */
  private serverEvent(type: string, event: Record<string, unknown>): string | null | undefined {
    if (type === 'session.created' || type === 'session.updated') {
      this.cap = sessionCap(event) ?? this.cap;
      return this.capAnswer(type, event);
    } else if (type === 'response.created') {
      this.began(responseOf(event).id);
    } else if (type === 'response.done') {
      const { id, status } = responseOf(event);
      this.endTurn(id, usageOf(event), status === 'failed');
    } else if (type === 'error') {
      const error = event.error as { code?: unknown; event_id?: unknown } | undefined;
      const own = this.capPending && error?.event_id === CAP_EVENT_ID;
      if (own) this.capPending = false;
      this.deps.logger[own ? 'warn' : 'info']({
        msg: own
          ? "the provider refused the session's output cap: its server-VAD turns are bounded by admission only"
          : 'realtime upstream error event',
        requestId: this.deps.ctx.sessionId,
        code: typeof error?.code === 'string' ? error.code : '',
      });
      if (own) return null;
    }
    return undefined;
  }

  /**
   * While Nexus's own `session.update` awaits its answer: the `session.created` is relayed with the cap the session
   * is about to have (the client sees the session as it will be), and the `session.updated` answering it is not
   * relayed (the client did not ask for it). The provider answers events in order, so it is the first one.
   */
  private capAnswer(type: string, event: Record<string, unknown>): string | null | undefined {
    if (!this.capPending) return undefined;
    if (type === 'session.updated') {
      this.capPending = false;
      return null;
    }
    const max = this.deps.ctx.auth.max_output_tokens!;
    const stated = sessionCap(event);
    return typeof stated === 'number' && stated <= max ? undefined : withCap(event, 'session', max, this.deps.beta);
  }
}
