/**
 * A batch's input file (JSONL, OpenAI's Batch API) read line by line as its bytes arrive (docs/batches.md): each
 * line parsed, checked against the plan's rules and bounded as a call to its endpoint is (inspectors.ts,
 * prepareCall), then forgotten; what is kept is the count, the total bound and the pricing of each model named.
 * Never more than one line is held.
 */
import type { ModelPolicy, Pricing } from '../domain/quota/model-pricing.js';
import { boundUnits } from '../domain/quota/quota-math.js';
import { AppError } from '../errors.js';
import { prepareCall, type Inspector } from '../protocols/inspectors.js';
import type { Protocol } from '../protocols/protocol.js';

/** The provider's limits on an input file (OpenAI's: REFERENCES.md, "Batches"). */
const MAX_BATCH_LINES = 50_000;
export const MAX_BATCH_FILE_BYTES = 200 * 1024 * 1024;
/** The models one file may name: their pricing is kept beside it. */
const MAX_MODELS = 64;
/** The endpoints a batch line may name (those Nexus meters whose answer is one JSON body). */
const BATCH_ENDPOINTS = new Set(['chat', 'completions', 'embeddings', 'responses', 'messages']);
const NEWLINE = 0x0a;
/** The longest line held while it arrives (a request with inline images may be long; a file with no line break is no batch's). */
const MAX_LINE_BYTES = 16 * 1024 * 1024;

/** What a line is checked against: the protocol whose bodies it carries, the plan's output cap and its model rules. */
export interface BatchRules {
  protocol: Protocol;
  maxOutputTokens: number;
  policy: ModelPolicy;
}

/** What a file's lines add up to, once every line has passed. */
export interface BatchFileBound {
  requests: number;
  /** The sum of the lines' bounds, in units (each at its model's pricing) and in tokens (input and output). */
  units: bigint;
  tokens: bigint;
  /** The pricing of each model the file names. */
  pricing: Record<string, Pricing>;
}

/** How a refusal names a request: a file's line (`line 3`), by default. */
type Naming = (n: number) => string;
const byLine: Naming = (n) => `line ${n}`;

export class BatchLines {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private bytes = 0;
  private line = 0;
  private units = 0n;
  private tokens = 0n;
  private readonly pricing = new Map<string, Pricing>();
  /** The first refusal, when the lines are read before the file is known to be a batch's (`strict` off). */
  private failure: AppError | undefined;

  /** `strict`: a bad line throws at once; else it is kept (failure) and the rest of the file is not read. */
  constructor(
    private readonly rules: BatchRules,
    public strict: boolean,
    /** How a refusal names the request (an inline batch's: `requests[2]`). */
    private readonly naming: Naming = byLine,
  ) {}

  /** The refusal of the lines read so far (a file read before its purpose was known). */
  get refusal(): AppError | undefined {
    return this.failure;
  }

  push(chunk: Buffer): void {
    if (this.failure) return;
    this.bytes += chunk.length;
    if (this.bytes > MAX_BATCH_FILE_BYTES)
      return this.fail(new AppError('invalid_parameter', 'A batch file may be at most 200 MB', { param: 'file' }));
    let from = 0;
    for (let at = chunk.indexOf(NEWLINE); at >= 0 && !this.failure; at = chunk.indexOf(NEWLINE, from)) {
      const piece = chunk.subarray(from, at);
      from = at + 1;
      if (this.pendingBytes) {
        this.pending.push(piece);
        const whole = Buffer.concat(this.pending);
        this.pending = [];
        this.pendingBytes = 0;
        this.read(whole);
      } else {
        this.read(piece);
      }
    }
    if (from < chunk.length && !this.failure) {
      // Copied: the chunk's buffer may be reused by the stream once this returns.
      this.pending.push(Buffer.from(chunk.subarray(from)));
      this.pendingBytes += chunk.length - from;
      if (this.pendingBytes > MAX_LINE_BYTES) {
        this.pending = [];
        this.pendingBytes = 0;
        this.fail(this.refused(this.line + 1, 'longer than 16 MiB'));
      }
    }
  }

  /** The file's bound once its last byte is read; throws the refusal of a bad line or an empty file. */
  end(): BatchFileBound {
    if (!this.failure && this.pendingBytes) {
      const last = Buffer.concat(this.pending);
      this.pending = [];
      this.pendingBytes = 0;
      this.read(last);
    }
    if (this.failure) throw this.failure;
    if (this.line === 0) throw new AppError('invalid_parameter', 'The batch file holds no request', { param: 'file' });
    return { requests: this.line, units: this.units, tokens: this.tokens, pricing: Object.fromEntries(this.pricing) };
  }

  private fail(err: AppError): void {
    this.failure ??= err;
    if (this.strict) throw err;
  }

  private read(text: Buffer): void {
    // A blank line (the file's last line break, a CRLF file's last CR) is no request.
    if (text.length === 0 || (text.length === 1 && text[0] === 0x0d)) return;
    const n = ++this.line;
    if (n > MAX_BATCH_LINES)
      return this.fail(new AppError('invalid_parameter', `A batch file may hold at most ${MAX_BATCH_LINES} requests`, { param: 'file' }));
    try {
      this.bound(n, text);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      this.fail(err.message.startsWith(`${this.naming(n)}:`) ? err : this.refused(n, err.message));
    }
  }

  private refused(n: number, why: string): AppError {
    const name = this.naming(n);
    return new AppError('invalid_parameter', `${name}: ${why}`, { param: name });
  }

  /** One line checked and bounded: its shape, its endpoint, its model, its output cap. */
  private bound(n: number, text: Buffer): void {
    let request: unknown;
    try {
      request = JSON.parse(text.toString('utf8'));
    } catch {
      throw this.refused(n, 'not JSON');
    }
    if (!request || typeof request !== 'object' || Array.isArray(request)) throw this.refused(n, 'not a JSON object');
    const { custom_id: customId, method, url, body } = request as Record<string, unknown>;
    if (typeof customId !== 'string' || !customId || customId.length > 512)
      throw this.refused(n, 'custom_id must be a string of 1 to 512 characters');
    if (method !== 'POST') throw this.refused(n, 'method must be POST');
    if (typeof url !== 'string') throw this.refused(n, 'url must be a string');
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw this.refused(n, 'body must be a JSON object');
    const inspector = this.endpointOf(url);
    if (!inspector)
      throw this.refused(
        n,
        `url '${url.slice(0, 100)}' is not an endpoint Nexus meters in a batch (chat/completions, completions, embeddings, responses; messages)`,
      );
    const fields = body as Record<string, unknown>;
    if (fields.stream === true) throw this.refused(n, 'a batch request cannot stream');
    const model = typeof fields.model === 'string' ? fields.model : '';
    const { policy, maxOutputTokens } = this.rules;
    if (!policy.allows(model))
      throw this.refused(n, model ? `the model '${model}' is not allowed on this plan` : 'the request names no model');
    // Sent as written: a cap the plan would add or clamp on a call cannot be here (docs/batches.md).
    if (inspector.capFields.length && !inspector.capFields.some((f) => fields[f] !== undefined && fields[f] !== null)) {
      throw this.refused(
        n,
        `the request names no output cap (${inspector.capFields.join(' or ')}); at most ${maxOutputTokens} on this plan`,
      );
    }
    const prepared = prepareCall(inspector, Buffer.from(JSON.stringify(fields)), { maxOutputTokens, clamp: false });
    let pricing = this.pricing.get(model);
    if (!pricing) {
      if (this.pricing.size >= MAX_MODELS) throw this.refused(n, `a batch file may name at most ${MAX_MODELS} models`);
      pricing = policy.pricingFor(model);
      this.pricing.set(model, pricing);
    }
    this.units += boundUnits(prepared.inputBound, prepared.outputBound, pricing);
    this.tokens += prepared.inputBound + prepared.outputBound;
  }

  /** The metered endpoint a line's url names (`/v1/chat/completions`, or `/chat/completions` on Azure). */
  private endpointOf(url: string): Inspector | undefined {
    const route = url.replace(/^\/+/, '').split('?')[0]!;
    const inspector = this.rules.protocol.inspectorFor('POST', route);
    return inspector && BATCH_ENDPOINTS.has(inspector.endpoint) ? inspector : undefined;
  }
}
