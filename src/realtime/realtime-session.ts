/**
 * One Realtime session: the client's WebSocket and the upstream's, frames relayed both ways as they come (audio is
 * never reassembled), and its turns metered (docs/realtime.md).
 *
 * - A client's `response.create` is admitted before it is sent upstream: the key's row is read again (cached), its
 *   access and connection authorized, the budget checked, and the turn's bound (its output cap, or the session's,
 *   at most the plan's maxOutputTokens; its input: the conversation so far, the last turn's input and output) taken
 *   on the access's quota lease. The client's frames after it wait for that decision, so their order upstream is
 *   kept.
 * - A `response.created` no client `response.create` asked for is a server-VAD turn: admitted as it runs. Refused,
 *   it is cancelled upstream (`response.cancel`) and charged what it used.
 * - A refused turn is not sent upstream: the client gets an `error` event naming the reason, and the session
 *   closes with 1008 once the turns in flight have completed. A turn already admitted is never cut.
 * - `response.done` settles its turn exactly by kind (realtime-turn.ts).
 * - The client goes away: the upstream socket is closed, each turn in flight charged for what was delivered. The
 *   upstream goes away: the client gets an `error` event and a close (1011), turns in flight charged likewise.
 * - No frame either way and no pong for the idle timeout: closed (1000). The client is pinged a third of it.
 */
import type { RawData, WebSocket } from 'ws';
import { AppError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { RateTicket } from '../domain/rate-limits/rate-allowances.js';
import type { CacheEntry } from '../gateway/auth-cache.js';
import { admitTurn, DEFAULT_OUTPUT_BOUND } from './realtime-admit.js';
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
import { holdSession, recordSession, type SessionBeat, type SessionCause, type SessionTotals } from './realtime-record.js';
import { recordTurn, Turn, type TurnContext, type TurnEnd } from './realtime-turn.js';

/** The event id of the `session.update` Nexus opens a session with (the plan's output cap), and of its answer's error. */
const CAP_EVENT_ID = 'event_nexus_session_cap';
/** How many bytes of a frame are decoded to find its type (an audio delta is not decoded whole). */
const HEAD_BYTES = 200;

export interface SessionDeps {
  ctx: TurnContext;
  logger: Logger;
  /** The key's row as the cache has it now (a turn is authorized on it). */
  lookup(): Promise<CacheEntry>;
  /** The key's row read again, bypassing the cache (a turn's admission found its period over). */
  reload(): Promise<CacheEntry>;
  idleTimeoutMs: number;
  /** The session speaks the Realtime API's beta (`OpenAI-Beta: realtime=v1`, Azure's preview path): its caps' field names. */
  beta: boolean;
  /** Its rate-limit ticket (a request and a slot held while it lives; none: the plan has no limits). */
  rateTicket: RateTicket | undefined;
  /** The session ended (both sockets closed). */
  ended(session: RealtimeSession): void;
}

type Frame = [RawData, boolean];

const textOf = (data: RawData): Buffer => (Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data));

export class RealtimeSession {
  /** Turns admitted on the client's `response.create`, sent upstream, their `response.created` not yet seen. */
  private readonly asked: Turn[] = [];
  /** Turns under way upstream, by response id. */
  private readonly running = new Map<string, Turn>();
  /** The turn whose output frames are being relayed (the last begun). */
  private latest: Turn | undefined;
  /** While a turn's admission is decided: the client's frames after its `response.create`, in order. */
  private waiting: Frame[] | null = null;
  private cap: number | 'inf' | undefined;
  /** The conversation so far, as the last `response.done` reported it: the next turn's input bound. */
  private conversation = 0n;
  /** Set once a turn was refused, or the session is ending: no new turn; the close to make once none is in flight. */
  private closing: { code: number; reason: string } | undefined;
  /** What its own record counts (realtime-record.ts). */
  private readonly totals: SessionTotals = { turns: 0, units: 0n, firstAudioMs: null };
  /** Turns being settled, and the client's turn whose admission is being decided: the session's record waits for them. */
  private readonly settling = new Set<Promise<void>>();
  private asking: Promise<void> | undefined;
  /** The session's own row for the heartbeat (its record should the process die), once its lease is held. */
  private sessionBeat: SessionBeat | undefined;
  private holding: Promise<void> | undefined;
  /** Nexus's own `session.update` (the plan's cap) awaits its answer, which is not passed on to the client. */
  private capPending = false;
  private ended = false;
  private lastActivity = Date.now();
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly client: WebSocket,
    readonly upstream: WebSocket,
    private readonly deps: SessionDeps,
  ) {
    client.on('message', (data, binary) => this.fromClient(data, binary));
    client.on('pong', () => this.touch());
    client.on('ping', () => this.touch());
    client.on('close', (code) => this.clientGone(code));
    // ws fails a frame past the maximum with this error, then closes 1009.
    client.on('error', (err: Error & { code?: string }) => this.clientGone(err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 1009 : 1006));
    upstream.on('message', (data, binary) => this.fromUpstream(data, binary));
    upstream.on('close', (code) => this.upstreamGone(`the provider closed the session (${code})`));
    upstream.on('error', (err) => this.upstreamGone(`the provider's socket failed: ${err.message}`));
    this.capSession();
    upstream.resume();
    this.holding = holdSession(deps.ctx, this.totals).then((beat) => {
      if (!beat) return;
      if (this.ended) beat.release();
      else this.sessionBeat = beat;
    });
    const every = Math.max(250, Math.floor(deps.idleTimeoutMs / 3));
    this.timer = setInterval(() => this.beat(), every);
    this.timer.unref();
  }

  get accessId(): string {
    return this.deps.ctx.auth.workspace_access_id;
  }

  /** Closes the session now (a shutdown): turns in flight are charged for what was delivered. */
  shutDown(): void {
    this.finish(1001, 'Nexus is shutting down', 'server_shutdown', { kind: 'shutdown' });
  }

  /**
   * Under a plan's maxOutputTokens the session is opened with it as its output cap (a `session.update`, before any
   * client frame), so the turns the provider starts itself (server VAD, no `response.create`) stop there too.
   */
  private capSession(): void {
    const max = this.deps.ctx.auth.max_output_tokens;
    if (!max) return;
    const session = this.deps.beta ? { max_response_output_tokens: max } : { type: 'realtime', max_output_tokens: max };
    this.upstream.send(JSON.stringify({ type: 'session.update', event_id: CAP_EVENT_ID, session }));
    this.capPending = true;
  }

  private touch(): void {
    this.lastActivity = Date.now();
  }

  private beat(): void {
    if (Date.now() - this.lastActivity >= this.deps.idleTimeoutMs) {
      this.sendClient(errorEvent('session_idle_timeout', `No frame for ${this.deps.idleTimeoutMs} ms: the session is closed`));
      this.finish(1000, 'idle timeout', 'session_idle_timeout', { kind: 'idle' });
      return;
    }
    if (this.client.readyState === this.client.OPEN) this.client.ping();
  }

  private sendClient(data: RawData | string, binary = false): void {
    if (this.client.readyState === this.client.OPEN) this.client.send(data, { binary });
  }

  private fromClient(data: RawData, binary: boolean): void {
    this.touch();
    if (this.waiting) {
      this.waiting.push([data, binary]);
      return;
    }
    this.relayClient(data, binary);
  }

  /** A client frame, its turn's admission (if it asks for one) decided before it and what follows go upstream. */
  private relayClient(data: RawData, binary: boolean): void {
    if (this.ended) return;
    if (!binary) {
      const text = textOf(data);
      const type = eventType(text.subarray(0, HEAD_BYTES).toString('utf8'));
      if (type === 'response.create') {
        this.waiting = [];
        this.asking = this.askedTurn(text);
        return;
      }
      if (type === 'session.update') data = Buffer.from(this.sessionUpdate(text));
    }
    if (this.upstream.readyState === this.upstream.OPEN) this.upstream.send(data, { binary });
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

  private async askedTurn(frame: Buffer): Promise<void> {
    const event = parseEvent(frame.toString('utf8')) ?? {};
    const turn = this.closing ? this.closing.reason : await this.admit(true, responseCap(event));
    if (typeof turn === 'string' || turn instanceof AppError) {
      const err = typeof turn === 'string' ? new AppError('quota_insufficient', turn) : turn;
      const eventId = typeof event.event_id === 'string' ? event.event_id : undefined;
      this.refuse(err, eventId);
    } else if (!this.ended && this.upstream.readyState === this.upstream.OPEN) {
      this.asked.push(turn);
      turn.admitted(turn.admission!);
      // Under a plan's maxOutputTokens the turn is sent capped at its output bound, so that bound holds upstream.
      const capped = this.deps.ctx.auth.max_output_tokens ? withCap(event, 'response', Number(turn.outputBound), this.deps.beta) : frame;
      this.upstream.send(capped, { binary: false });
    } else {
      this.record(turn, { status: 'CLIENT_ABORTED', attempt: 'ABORTED', errorCode: 'client_aborted', usage: null });
    }
    const queued = this.waiting ?? [];
    this.waiting = null;
    for (let i = 0; i < queued.length; i++) {
      if (this.waiting) {
        (this.waiting as Frame[]).push(...queued.slice(i));
        return;
      }
      this.relayClient(...queued[i]!);
    }
    this.closeIfQuiet();
  }

  /**
   * A turn refused: its client told why. Refused for the plan's tokens per minute, the session stays open (the
   * client may ask again once the minute has room); for anything else, it closes 1008 once no turn is in flight.
   */
  private refuse(err: AppError, eventId?: string): void {
    this.sendClient(refusalEvent(err, eventId));
    if (err.code === 'rate_limited') return;
    this.closing ??= { code: 1008, reason: err.code };
    this.closeIfQuiet();
  }

  private closeIfQuiet(): void {
    if (!this.closing || this.asked.length || this.running.size || this.waiting) return;
    this.finish(this.closing.code, this.closing.reason, null, { kind: 'refused', code: this.closing.reason });
  }

  /** A turn's admission (realtime-admit.ts): resolves with the turn, or the refusal. */
  private admit(byClient: boolean, asked: number | 'inf' | undefined): Promise<Turn | AppError> {
    const { deps } = this;
    return admitTurn({
      ctx: deps.ctx,
      lookup: deps.lookup,
      reload: deps.reload,
      byClient,
      asked,
      sessionCap: this.cap,
      conversation: this.conversation,
    });
  }

  private fromUpstream(data: RawData, binary: boolean): void {
    this.touch();
    if (!binary) {
      const buf = textOf(data);
      const type = eventType(buf.subarray(0, HEAD_BYTES).toString('utf8'));
      if (carriesOutput(type)) this.output(carriesAudio(type));
      else if (PARSED_SERVER_EVENTS.has(type)) {
        const relayed = this.serverEvent(type, parseEvent(buf.toString('utf8')) ?? {});
        if (relayed === null) return;
        if (relayed !== undefined) data = Buffer.from(relayed);
      }
    }
    this.sendClient(data, binary);
    this.closeIfQuiet();
  }

  /** A parsed server event read; returns the frame to relay in its place (undefined: as it came; null: none). */
  private serverEvent(type: string, event: Record<string, unknown>): string | null | undefined {
    if (type === 'session.created' || type === 'session.updated') {
      this.cap = sessionCap(event) ?? this.cap;
      return this.capAnswer(type, event);
    } else if (type === 'response.created') {
      this.began(responseOf(event).id);
    } else if (type === 'response.done') {
      this.done(event);
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

  /** A response begins upstream: the client's turn asked first, else a server-VAD turn, admitted now. */
  private began(responseId: string | null): void {
    let turn = this.asked.shift();
    if (!turn) {
      const { ctx } = this.deps;
      const planMax = ctx.auth.max_output_tokens ? BigInt(ctx.auth.max_output_tokens) : DEFAULT_OUTPUT_BOUND;
      const pricing = ctx.meter.modelPolicy(ctx.auth).pricingFor(ctx.model);
      const vad = new Turn(ctx, ctx.meter.clock.now(), false, this.conversation, planMax, pricing);
      vad.admitting = this.admitVad(vad);
      turn = vad;
    }
    turn.responseId = responseId;
    this.running.set(responseId ?? turn.id, turn);
    this.latest = turn;
  }

  /** A server-VAD turn already under way: admitted at its bound, or cancelled upstream and charged what it uses. */
  private async admitVad(turn: Turn): Promise<void> {
    const admitted = this.closing ? new AppError('quota_insufficient', this.closing.reason) : await this.admit(false, undefined);
    if (!(admitted instanceof AppError)) {
      turn.rateTicket = admitted.rateTicket;
      turn.admitted(admitted.admission!);
      return;
    }
    // Refused: what it uses is still charged, beyond any bound (an ADJUSTMENT past the lease), and it ends here.
    const auth = this.deps.ctx.auth;
    if (auth.period_id) {
      const target = { workspaceId: auth.workspace_id, accessId: auth.workspace_access_id, periodId: auth.period_id };
      const held = await this.deps.ctx.meter.leases.admit(target, 0n).catch(() => undefined);
      if (held?.ok) turn.admitted(held.admission);
    }
    if (this.upstream.readyState === this.upstream.OPEN && turn.responseId)
      this.upstream.send(JSON.stringify({ type: 'response.cancel', response_id: turn.responseId }));
    // Refused for tokens per minute, its tokens are still counted (on the session's ticket) and the session stays open.
    this.refuse(admitted);
  }

  private done(event: Record<string, unknown>): void {
    const { id, status } = responseOf(event);
    const turn = (id && this.running.get(id)) || this.latest;
    if (!turn) return;
    this.running.delete(turn.responseId ?? turn.id);
    if (this.latest === turn) this.latest = undefined;
    const usage = usageOf(event);
    if (usage) this.conversation = usage.inputTokens + usage.outputTokens;
    const failed = status === 'failed';
    void this.settle(turn, {
      status: failed ? 'UPSTREAM_ERROR' : 'SUCCEEDED',
      attempt: failed ? 'UPSTREAM_ERROR' : 'SUCCEEDED',
      errorCode: usage ? null : 'usage_missing',
      usage: usage ?? turn.delivered(),
    });
  }

  /** A frame of the latest turn's output is relayed: the session's first audio is timed. */
  private output(audio: boolean): void {
    const turn = this.latest;
    if (!turn) return;
    turn.output(audio);
    if (audio && this.totals.firstAudioMs === null) this.totals.firstAudioMs = turn.firstAudioMs();
  }

  /** Settles the turn once its admission is decided (a server-VAD turn's may still be under way). */
  private settle(turn: Turn, end: TurnEnd): Promise<void> {
    const settled = turn.admitting.then(() => this.record(turn, end));
    this.settling.add(settled);
    void settled.finally(() => this.settling.delete(settled));
    return settled;
  }

  /**
   * Records the turn; its tokens count against the plan's tokens per minute now, not when the session ends: its own
   * admission's settled to them, or (a server-VAD turn refused) spent on the session's.
   */
  private record(turn: Turn, end: TurnEnd): void {
    if (turn.settled) return;
    this.totals.turns++;
    this.totals.units += recordTurn(this.deps.ctx, turn, end);
    const { rates } = this.deps.ctx.meter;
    const tokens = end.usage ? Number(end.usage.inputTokens + end.usage.outputTokens) : null;
    if (turn.rateTicket) rates.settle(turn.rateTicket, tokens);
    else if (this.deps.rateTicket && tokens) rates.spend(this.deps.rateTicket, tokens);
  }

  private clientGone(code: number): void {
    this.finish(1000, 'client closed', 'client_aborted', { kind: 'client', code });
  }

  private upstreamGone(why: string): void {
    if (this.ended) return;
    this.sendClient(errorEvent('upstream_closed', `The provider ended the session: ${why}`));
    this.finish(1011, 'upstream closed', 'upstream_stream_broken', { kind: 'upstream' });
  }

  /**
   * Ends the session once: both sockets closed, each turn in flight charged for what was delivered (`cause`: why it
   * was cut; null when none can be), the turns asked for but not begun given back; then, its turns recorded, its own
   * record (`ended`: why).
   */
  private finish(code: number, reason: string, cause: string | null, ended: SessionCause): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.timer);
    const cut: TurnEnd = {
      status: cause === 'client_aborted' ? 'CLIENT_ABORTED' : 'FAILED',
      attempt: cause === 'client_aborted' ? 'ABORTED' : 'FAILED',
      errorCode: cause ?? 'session_closed',
      usage: null,
    };
    for (const turn of this.running.values()) void this.settle(turn, { ...cut, usage: turn.delivered() });
    for (const turn of this.asked) void this.settle(turn, cut);
    this.running.clear();
    this.asked.length = 0;
    if (this.upstream.readyState === this.upstream.OPEN) this.upstream.close(1000);
    if (this.client.readyState === this.client.OPEN) this.client.close(code, reason);
    this.deps.ended(this);
    void this.recordWhenSettled(ended);
  }

  private async recordWhenSettled(ended: SessionCause): Promise<void> {
    await this.holding;
    await this.asking;
    await Promise.all(this.settling);
    recordSession(this.deps.ctx, ended, this.totals, this.sessionBeat);
  }
}
