/**
 * One upstream call, its answer relayed to the client as it arrives. Built on
 * undici's dispatch API: the answer's bytes go from undici's parser to the
 * client's socket through this handler's callbacks, with no stream or async
 * iterator in between (undici's `request()` wraps each answer in a Readable,
 * which with node's HTTP server made the bare passthrough cost about half as
 * much again here). Backpressure both ways: a client that reads slowly pauses
 * the upstream's socket until it drains.
 *
 * On the way the usage inspector reads the answer (an SSE stream event by
 * event, a JSON answer whole at its end), a stream that passes the call's output
 * bound is cut there (sse-meter.ts), the provider's key is masked, and the
 * times the records want are taken (what it reads of the answer, and its options:
 * relay-answer.ts, whose AnswerRead it extends). The answer's headers go out in
 * one writeHead: the gateway's own, then those of the upstream a client needs.
 */
import type { ServerResponse } from 'node:http';
import type { Transform } from 'node:stream';
import type { Dispatcher } from 'undici';
import { clientHeaderList } from './headers.js';
import { SecretMask } from './secret-mask.js';
import { EventStreamMeter } from './event-stream-meter.js';
import { EVENT_STREAM_CONTENT_TYPE } from '../protocols/event-stream.js';
import { AnswerRead, now, retryAfterOf, type RelayEnd, type RelayOptions } from './relay-answer.js';
import { SseMeter } from './sse-meter.js';
import { decoderFor } from './upstreams.js';
import { Upload } from './upload.js';

export class Relay extends AnswerRead implements Dispatcher.DispatchHandler {
  /** A failover attempt's head, written with its first byte. */
  private pendingHead: [number, string[]] | undefined;
  private firstTokenTimer: NodeJS.Timeout | undefined;

  private controller: Dispatcher.DispatchController | undefined;
  /** An answer held whole for rewriteJson: its bytes, and its status and headers to send with it. */
  private held: Buffer[] | null = null;
  private heldHead: [number, string[]] | undefined;
  private responseNoted = false;
  private mask: SecretMask | undefined;
  private decoder: Transform | undefined;
  private headersFlush: NodeJS.Immediate | undefined;
  private waitingDrain = false;
  /** A metered answer that is not streamed is read to its end even when the client has left: its usage is in its last bytes. */
  private readonly readToEnd: boolean;
  private resolve!: () => void;
  readonly done: Promise<void>;

  constructor(
    private readonly res: ServerResponse,
    options: RelayOptions,
  ) {
    super(options);
    this.readToEnd = Boolean(options.inspector && options.prepared && !options.prepared.stream);
    this.done = new Promise((r) => (this.resolve = r));
    res.on('close', this.onClientClose);
  }

  /** Sends the request; `done` resolves once the call has ended, however it ended. */
  start(): Promise<void> {
    // A client that left while the call was admitted is gone already (its 'close' will not come again) and nothing
    // has been asked of the provider yet: the call is not made.
    if (this.res.destroyed) {
      this.clientGone = true;
      this.cancelReason = new Error('The client closed the connection before the provider was called');
      this.stop('unanswered', this.cancelReason);
      return this.done;
    }
    const deadline = this.options.failover?.firstTokenMs;
    if (deadline !== undefined && this.options.prepared?.stream) {
      this.firstTokenTimer = setTimeout(() => {
        if (this.tFirstUpstream === undefined) this.failOver('first_token_timeout', this.status, undefined);
      }, deadline);
    }
    const { pool, request } = this.options;
    pool.dispatch(
      {
        method: request.method,
        path: request.path,
        headers: request.headers,
        body: request.body instanceof Upload ? request.body.open() : request.body.length ? request.body : null,
        headersTimeout: request.timeoutMs,
        bodyTimeout: request.timeoutMs,
      },
      this,
    );
    return this.done;
  }

  /** Stops the call (the client left, or a shutdown cut it); it ends as unanswered or broken. */
  cancel(reason: Error): void {
    if (this.cancelReason || this.end) return;
    this.cancelReason = reason;
    this.controller?.abort(reason);
  }

  private readonly onClientClose = (): void => {
    if (this.res.writableFinished || this.end) return;
    this.clientGone = true;
    if (!this.readToEnd) this.cancel(new Error('The client closed the connection'));
    else if (this.controller?.paused) this.controller.resume();
  };

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.cancelReason) controller.abort(this.cancelReason);
    else if (this.failedOver) controller.abort(new Error('The attempt moved on'));
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    status: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (status < 200 || this.end) return; // 1xx: informational, the answer is still to come (or the attempt moved on)
    this.status = status;
    const failover = this.options.failover;
    if (failover?.retryOn.has(status)) {
      const retryAfter = retryAfterOf(headers);
      if (retryAfter === undefined || !failover.waitsFor || failover.waitsFor(retryAfter)) {
        this.failOver('upstream_status', status, retryAfter);
        return;
      }
    }
    const { inspector, prepared } = this.options;
    const contentType = String(headers['content-type'] ?? '');
    // A protocol whose streams are AWS event-streams (src/protocols/event-stream.ts) has them read by their frames.
    const binary = inspector?.protocol.streamFraming === 'event-stream' && contentType.startsWith(EVENT_STREAM_CONTENT_TYPE);
    const isStream = binary || contentType.startsWith('text/event-stream');
    const reading = Boolean(inspector && prepared && status < 300);
    if (reading && isStream) {
      this.meter = binary ? new EventStreamMeter(inspector, prepared!) : new SseMeter(inspector!, prepared!);
      this.options.watcher?.streamBegan();
    } else if (reading && inspector!.answerRead(contentType)) {
      // Its endpoint reads this answer for its usage; one it does not (media) is relayed as it comes, and charged by
      // its endpoint's rule (charge.ts).
      this.jsonChunks = [];
    } else if (status >= 400 && !isStream) {
      this.errorChunks = [];
    }
    const capture = this.options.capture;
    if (capture) {
      capture.head(status, headers);
      if (this.meter) this.meter.assembleInto(capture.stream());
    }
    const out = this.options.answerHeaders;
    if (headers['x-request-id'] === undefined) out.push('x-request-id', this.options.requestId);
    clientHeaderList(headers, out, this.options.passedBack);
    const encoded = headers['content-encoding'];
    const decoder = decoderFor(encoded);
    if (decoder === null) out.push('content-encoding', String(encoded));
    else if (decoder) this.decode(decoder);
    if (this.options.rewriteJson && status >= 200 && status < 300 && contentType.includes('json')) {
      this.held = [];
      this.heldHead = [status, out];
      if (this.options.maskedKey) this.mask = new SecretMask(this.options.maskedKey);
      return;
    }
    // Forwarded byte for byte: the length is known, so the answer goes out unchunked (a metered stream may be
    // rewritten or cut: its length is not known).
    const length = headers['content-length'];
    if (!decoder && !this.meter && typeof length === 'string' && status !== 204 && status !== 304) out.push('content-length', length);
    if (isStream) out.push('cache-control', 'no-cache');
    if (failover) {
      // Nothing goes out before the answer's first byte: until then the call may still move on.
      this.pendingHead = [status, out];
      if (this.options.maskedKey) this.mask = new SecretMask(this.options.maskedKey);
      return;
    }
    this.res.writeHead(status, out);
    // The provider's key, should the upstream echo it, never reaches the client.
    if (this.options.maskedKey) this.mask = new SecretMask(this.options.maskedKey);
    if (isStream) {
      // The headers go out with the first event when it came with them (one write), else on their own at once.
      this.headersFlush = setImmediate(() => {
        if (!this.res.headersSent && !this.res.destroyed) this.res.flushHeaders();
      });
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.status === undefined || this.end) return; // a 1xx answer's body (none in practice), or a stream cut
    this.tFirstUpstream ??= now();
    if (this.decoder) {
      if (!this.decoder.write(chunk)) {
        controller.pause();
        this.decoder.once('drain', () => controller.resume());
      }
      return;
    }
    if (!this.take(chunk))
      this.waitForClient(
        () => controller.resume(),
        () => controller.pause(),
      );
  }

  onResponseEnd(): void {
    if (this.status === undefined) return;
    this.tUpstreamEnd = now();
    if (this.decoder) this.decoder.end();
    else this.finish();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    // An answer that broke before its first byte reached the client: the call may still move on.
    if (this.options.failover && this.status !== undefined && !this.res.headersSent && !this.cancelReason && !this.end) {
      this.failOver('upstream_stream_broken', this.status, undefined);
      return;
    }
    this.tUpstreamEnd ??= now();
    this.stop(this.status === undefined ? 'unanswered' : 'broken', this.cancelReason ?? err);
  }

  /** The answer's bytes (decoded), on their way to the client; false when the client cannot take more now. */
  private take(chunk: Buffer): boolean {
    // A call that keeps its request log takes the answer's bytes (a stream's is assembled by its meter instead).
    if (this.options.capture !== undefined && this.meter === null) this.options.capture.push(chunk);
    if (this.held) {
      this.held.push(chunk);
      return true;
    }
    let out: Buffer | string = chunk;
    const meter = this.meter;
    if (meter) {
      out = meter.push(chunk);
      // A Responses API client may continue this response as soon as it reads its last event, before the stream
      // ends and the call is settled: it is told as soon as the meter has its id and usage.
      if (meter.responseId !== null && !this.responseNoted && meter.complete) {
        this.responseNoted = true;
        this.options.watcher?.responseSeen(meter.responseId, meter.usage!.inputTokens + meter.usage!.outputTokens);
      }
    } else {
      this.keep(chunk);
    }
    if (this.clientGone) return true;
    this.writePendingHead();
    if (this.mask) out = typeof out === 'string' ? this.mask.pushEvents(out) : this.mask.push(out);
    let written = true;
    if (out.length) {
      this.tFirstClient ??= now();
      written = this.res.write(out);
    }
    if (meter?.cut) this.cutAtBound();
    else if (meter?.malformed) this.endUnreadable();
    return written;
  }

  /**
   * The stream passed its output bound: the client has its end (the meter's), the upstream request is aborted,
   * and the call ends complete (charged its bound: metered-call.ts).
   */
  private cutAtBound(): void {
    this.endEarly(true, 'The answer passed its output bound');
  }

  /**
   * The stream cannot be read on (an event-stream frame that did not decode): the same, charged by the
   * missing-usage rule (the meter's end told the client that the provider's stream broke).
   */
  private endUnreadable(): void {
    this.endEarly(false, 'The answer could not be read');
  }

  private endEarly(cut: boolean, reason: string): void {
    if (this.end) return;
    if (!this.clientGone) this.writePendingHead();
    this.tUpstreamEnd ??= now();
    clearImmediate(this.headersFlush);
    // Ended first: the abort's onResponseError then finds the call over.
    this.end = 'complete';
    this.cut = cut;
    if (!this.clientGone) {
      const held = this.mask?.end();
      if (held?.length) this.res.write(held);
      this.res.end();
    }
    this.decoder?.destroy();
    this.controller?.abort(new Error(reason));
    this.read();
    this.done_();
  }

  /** Pauses the source until the client drains (or leaves: a call read to its end reads on). */
  private waitForClient(resume: () => void, pause: () => void): void {
    if (this.waitingDrain || this.res.destroyed) return;
    this.waitingDrain = true;
    pause();
    const go = () => {
      this.res.off('drain', go);
      this.res.off('close', go);
      this.waitingDrain = false;
      resume();
    };
    this.res.on('drain', go);
    this.res.on('close', go);
  }

  private decode(decoder: Transform): void {
    this.decoder = decoder;
    decoder.on('data', (chunk: Buffer) => {
      if (!this.take(chunk))
        this.waitForClient(
          () => decoder.resume(),
          () => decoder.pause(),
        );
    });
    decoder.on('end', () => this.finish());
    // Corrupt data fails the answer as a broken stream.
    decoder.on('error', (err: Error) => {
      this.tUpstreamEnd ??= now();
      this.controller?.abort(err);
      this.stop('broken', err);
    });
  }

  private finish(): void {
    if (this.end) return;
    clearImmediate(this.headersFlush);
    if (!this.clientGone) this.writePendingHead();
    if (this.held) {
      if (!this.clientGone) this.sendHeld(this.held);
    } else if (!this.clientGone) {
      if (this.meter) {
        const tail = this.meter.end();
        if (tail.length) this.res.write(!this.mask ? tail : typeof tail === 'string' ? this.mask.pushEvents(tail) : this.mask.push(tail));
      }
      const held = this.mask?.end();
      if (held?.length) this.res.write(held);
      this.res.end();
    } else {
      this.meter?.end();
    }
    this.read();
    this.end = 'complete';
    this.cut = this.meter?.cut ?? false;
    this.done_();
  }

  /** The answer held for rewriteJson, rewritten, with its headers and its new length. */
  private sendHeld(chunks: Buffer[]): void {
    const [status, out] = this.heldHead!;
    let body = Buffer.from(this.options.rewriteJson!(Buffer.concat(chunks).toString('utf8')));
    if (this.mask) body = Buffer.concat([this.mask.push(body), this.mask.end()]);
    out.push('content-length', String(body.length));
    this.tFirstClient ??= now();
    this.res.writeHead(status, out);
    this.res.end(body);
  }

  private stop(end: RelayEnd, error: Error): void {
    if (this.end) return;
    this.tUpstreamEnd ??= now();
    clearImmediate(this.headersFlush);
    this.end = end;
    this.error = error;
    this.decoder?.destroy();
    if (end === 'broken' || this.cancelReason) this.res.destroy();
    if (end === 'broken') this.read();
    this.done_();
  }

  /** A failover attempt's head goes out with its first byte (or its end). */
  private writePendingHead(): void {
    const head = this.pendingHead;
    if (!head) return;
    this.pendingHead = undefined;
    clearTimeout(this.firstTokenTimer);
    this.res.writeHead(head[0], head[1]);
  }

  /** A route's attempt moves the call on: nothing was sent to the client; the upstream request is aborted. */
  private failOver(errorCode: string, status: number | undefined, retryAfterMs: number | undefined): void {
    if (this.end || this.res.headersSent) return;
    this.failedOver = { errorCode, status, retryAfterMs };
    this.pendingHead = undefined;
    this.tUpstreamEnd ??= now();
    clearImmediate(this.headersFlush);
    this.end = 'unanswered';
    this.decoder?.destroy();
    this.controller?.abort(new Error(`The attempt moved on: ${errorCode}`));
    this.done_();
  }

  private done_(): void {
    clearTimeout(this.firstTokenTimer);
    this.res.off('close', this.onClientClose);
    this.resolve();
  }
}
