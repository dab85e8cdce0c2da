/**
 * One realtime session, whatever its protocol: the client's WebSocket and the upstream's, frames relayed both ways
 * as they come (audio is never reassembled), and its turns metered (docs/realtime.md). What a protocol's frames
 * mean is its subclass's (OpenAI's and Azure's Realtime API: realtime-openai.ts; Gemini's Live API:
 * gemini-session.ts); what a turn is, how it is admitted, settled and recorded, and how the session ends, is here.
 *
 * - A turn the client asks for (`askTurn`) is admitted before its frame is sent upstream: the key's row is read
 *   again (cached), its access and connection authorized, the budget checked, and the turn's bound (its output cap,
 *   or the session's, at most the plan's maxOutputTokens; its input: the conversation so far) taken on the access's
 *   quota lease. The client's frames after it wait for that decision, so their order upstream is kept.
 * - A turn the provider begins that no client frame asked for is a server-VAD turn: admitted as it runs. Refused,
 *   it is cancelled upstream where the protocol can, and charged what it used.
 * - A refused turn is not sent upstream; the client is told as its protocol can, and the session closes with 1008
 *   once the turns in flight have completed. A turn already admitted is never cut.
 * - A turn's end settles it exactly by kind from the usage its provider reports (realtime-turn.ts).
 * - The client goes away: the upstream socket is closed, each turn in flight charged for what was delivered. The
 *   upstream goes away: the client gets a close (1011), turns in flight charged likewise.
 * - No frame either way and no pong for the idle timeout: closed (1000). The client is pinged a third of it.
 */
import type { RawData, WebSocket } from 'ws';
import { AppError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { RateTicket } from '../domain/rate-limits/rate-allowances.js';
import type { Usage } from '../protocols/usage.js';
import type { CacheEntry } from '../gateway/auth-cache.js';
import { admitTurn, DEFAULT_OUTPUT_BOUND } from './realtime-admit.js';
import { holdSession, recordSession, type SessionBeat, type SessionCause, type SessionTotals } from './realtime-record.js';
import { recordTurn, Turn, type TurnContext, type TurnEnd } from './realtime-turn.js';

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
  /** The model map of the route's target that holds the session (Gemini's model comes in its first frame). */
  modelMap?: Record<string, string> | undefined;
  /** Its rate-limit ticket (a request and a slot held while it lives; none: the plan has no limits). */
  rateTicket: RateTicket | undefined;
  /** The session ended (both sockets closed). */
  ended(session: RealtimeSession): void;
}

type Frame = [RawData, boolean];

/** A frame's bytes, whole. */
export const bytesOf = (data: RawData): Buffer =>
  Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);

export abstract class RealtimeSession {
  /** Turns admitted on the client's asking, sent upstream, not yet begun there. */
  private readonly asked: Turn[] = [];
  /** Turns under way upstream, by response id (or their own id when the protocol names none). */
  private readonly running = new Map<string, Turn>();
  /** The turn whose output frames are being relayed (the last begun). */
  protected latest: Turn | undefined;
  /** While a turn's admission is decided: the client's frames after the one asking for it, in order. */
  private waiting: Frame[] | null = null;
  /** The session's output cap, as the provider (or its setup) last stated it. */
  protected cap: number | 'inf' | undefined;
  /** The conversation so far, as the last turn's usage reported it: the next turn's input bound. */
  private conversation = 0n;
  /** Set once a turn was refused, or the session is ending: no new turn; the close to make once none is in flight. */
  private closing: { reason: string; refusal: string } | undefined;
  /** What its own record counts (realtime-record.ts). */
  private readonly totals: SessionTotals = { turns: 0, units: 0n, firstAudioMs: null };
  /** Turns being settled, and the client's turn whose admission is being decided: the session's record waits for them. */
  private readonly settling = new Set<Promise<void>>();
  private asking: Promise<void> | undefined;
  /** The session's own row for the heartbeat (its record should the process die), once its lease is held. */
  private sessionBeat: SessionBeat | undefined;
  private holding: Promise<void> | undefined;
  protected ended = false;
  private lastActivity = Date.now();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly client: WebSocket,
    readonly upstream: WebSocket,
    protected readonly deps: SessionDeps,
  ) {}

  /** Starts relaying: both sockets listened to, the protocol's opening frames sent, its lease held, its pings begun. */
  start(): this {
    const { client, upstream, deps } = this;
    client.on('message', (data, binary) => this.fromClient(data, binary));
    client.on('pong', () => this.touch());
    client.on('ping', () => this.touch());
    client.on('close', (code) => this.clientGone(code));
    // ws fails a frame past the maximum with this error, then closes 1009.
    client.on('error', (err: Error & { code?: string }) => this.clientGone(err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 1009 : 1006));
    upstream.on('message', (data, binary) => {
      this.touch();
      this.serverFrame(data, binary);
      this.closeIfQuiet();
    });
    upstream.on('close', (code) => this.upstreamGone(`the provider closed the session (${code})`));
    upstream.on('error', (err) => this.upstreamGone(`the provider's socket failed: ${err.message}`));
    this.opening();
    upstream.resume();
    this.holding = holdSession(deps.ctx, this.totals).then((beat) => {
      if (!beat) return;
      if (this.ended) beat.release();
      else this.sessionBeat = beat;
    });
    const every = Math.max(250, Math.floor(deps.idleTimeoutMs / 3));
    this.timer = setInterval(() => this.beat(), every);
    this.timer.unref();
    return this;
  }

  get accessId(): string {
    return this.deps.ctx.auth.workspace_access_id;
  }

  /** Closes the session now (a shutdown): turns in flight are charged for what was delivered. */
  shutDown(): void {
    this.finish(1001, 'Nexus is shutting down', 'server_shutdown', { kind: 'shutdown' });
  }

  /** What the protocol sends upstream before any client frame (OpenAI: the plan's output cap). */
  protected opening(): void {}

  /** A client frame to relay (its turn, if it asks for one, admitted through `askTurn`). */
  protected abstract clientFrame(data: RawData, binary: boolean): void;

  /** An upstream frame: read as the protocol needs, relayed (`sendClient`), its turn begun or ended. */
  protected abstract serverFrame(data: RawData, binary: boolean): void;

  /** Tells the client why the session ends (`code`), where its protocol has a way (OpenAI's `error` event). */
  protected abstract notify(code: string, message: string): void;

  /**
   * Tells the client its turn was refused, where its protocol has a way; returns whether the session stays open (the
   * client may ask again), else it closes 1008 once no turn is in flight, its close reason `closeReason(err)`.
   */
  protected abstract refusal(err: AppError, eventId?: string): boolean;

  /** The close reason of a session a refusal ends (at most 123 bytes). */
  protected closeReason(err: AppError): string {
    return err.code;
  }

  /** A server-VAD turn refused while it runs: stopped upstream where the protocol can. */
  protected cancel(_turn: Turn): void {}

  private touch(): void {
    this.lastActivity = Date.now();
  }

  private beat(): void {
    if (Date.now() - this.lastActivity >= this.deps.idleTimeoutMs) {
      this.notify('session_idle_timeout', `No frame for ${this.deps.idleTimeoutMs} ms: the session is closed`);
      this.finish(1000, 'idle timeout', 'session_idle_timeout', { kind: 'idle' });
      return;
    }
    if (this.client.readyState === this.client.OPEN) this.client.ping();
  }

  protected sendClient(data: RawData | string, binary = false): void {
    if (this.client.readyState === this.client.OPEN) this.client.send(data, { binary });
  }

  protected sendUpstream(data: RawData | string, binary = false): void {
    if (this.upstream.readyState === this.upstream.OPEN) this.upstream.send(data, { binary });
  }

  private fromClient(data: RawData, binary: boolean): void {
    this.touch();
    if (this.waiting) {
      this.waiting.push([data, binary]);
      return;
    }
    if (!this.ended) this.clientFrame(data, binary);
  }

  /**
   * A client frame asking for a turn (its output cap `asked`, its event id `eventId` for a refusal): held, with the
   * frames after it, while the turn is admitted; admitted, `send(turn)` is sent upstream.
   */
  protected askTurn(asked: number | 'inf' | undefined, eventId: string | undefined, send: (turn: Turn) => RawData | string): void {
    this.waiting = [];
    this.asking = this.askedTurn(asked, eventId, send);
  }

  private async askedTurn(
    asked: number | 'inf' | undefined,
    eventId: string | undefined,
    send: (turn: Turn) => RawData | string,
  ): Promise<void> {
    const turn = this.closing ? this.closing.refusal : await this.admit(true, asked);
    if (typeof turn === 'string' || turn instanceof AppError) {
      this.refuse(typeof turn === 'string' ? new AppError('quota_insufficient', turn) : turn, eventId);
    } else if (!this.ended && this.upstream.readyState === this.upstream.OPEN) {
      this.asked.push(turn);
      turn.admitted(turn.admission!);
      this.sendUpstream(send(turn));
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
      if (!this.ended) this.clientFrame(...queued[i]!);
    }
    this.closeIfQuiet();
  }

  /** A turn refused: its client told why (`refusal`); unless that leaves it open, it closes 1008 once no turn is in flight. */
  protected refuse(err: AppError, eventId?: string): void {
    if (this.refusal(err, eventId)) return;
    this.closing ??= { reason: this.closeReason(err), refusal: err.code };
    this.closeIfQuiet();
  }

  private closeIfQuiet(): void {
    if (!this.closing || this.asked.length || this.running.size || this.waiting) return;
    this.finish(1008, this.closing.reason, null, { kind: 'refused', code: this.closing.refusal });
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

  /** A turn begins upstream (its response id, if the protocol names one): the client's asked first, else a server-VAD turn, admitted now. */
  protected began(responseId: string | null): Turn {
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
    return turn;
  }

  /** A server-VAD turn already under way: admitted at its bound, or cancelled upstream and charged what it uses. */
  private async admitVad(turn: Turn): Promise<void> {
    const admitted = this.closing ? new AppError('quota_insufficient', this.closing.refusal) : await this.admit(false, undefined);
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
    this.cancel(turn);
    // Refused for tokens per minute, its tokens are still counted (on the session's ticket); the protocol decides whether it stays open.
    this.refuse(admitted);
  }

  /**
   * A turn ends upstream (`responseId`: the one its end names; else the latest), with the usage it reports (null:
   * none; it is charged as delivered) and whether the provider says it failed.
   */
  protected endTurn(responseId: string | null, usage: Usage | null, failed: boolean): void {
    const turn = (responseId && this.running.get(responseId)) || this.latest;
    if (!turn) return;
    this.running.delete(turn.responseId ?? turn.id);
    if (this.latest === turn) this.latest = undefined;
    if (usage) this.conversation = usage.inputTokens + usage.outputTokens;
    void this.settle(turn, {
      status: failed ? 'UPSTREAM_ERROR' : 'SUCCEEDED',
      attempt: failed ? 'UPSTREAM_ERROR' : 'SUCCEEDED',
      errorCode: usage ? null : 'usage_missing',
      usage: usage ?? turn.delivered(),
    });
  }

  /** A frame of the latest turn's output is relayed (`audio`: of its audio): the session's first audio is timed. */
  protected output(audio: boolean): void {
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
    this.notify('upstream_closed', `The provider ended the session: ${why}`);
    this.finish(1011, 'upstream closed', 'upstream_stream_broken', { kind: 'upstream' });
  }

  /**
   * Ends the session once: both sockets closed, each turn in flight charged for what was delivered (`cause`: why it
   * was cut; null when none can be), the turns asked for but not begun given back; then, its turns recorded, its own
   * record (`ended`: why).
   */
  protected finish(code: number, reason: string, cause: string | null, ended: SessionCause): void {
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
