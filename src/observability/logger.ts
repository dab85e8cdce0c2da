/**
 * winston, one JSON object per line. Nothing secret is passed to it: request
 * lines carry ids, paths without query strings, statuses and durations only.
 *
 * Warn and error lines are rate-limited by what they say: past `lines` lines of one message (and error
 * code) in a window of `windowMs`, the others are dropped, and at the window's end one line says how many
 * were (`log lines suppressed`). A database outage at hundreds of calls a second then writes a few lines a
 * window, not one per call. Info and debug lines (the request log) are never dropped.
 */
import winston from 'winston';

export type Logger = winston.Logger;

/** How many warn or error lines of one message a window lets through. */
export interface RepeatLimit {
  lines: number;
  windowMs: number;
}

const DEFAULT_REPEAT_LIMIT: RepeatLimit = { lines: 10, windowMs: 10_000 };

/** Marks the summary lines, which the limit lets through. */
const SUMMARY = Symbol('nexus.log-summary');

/**
 * A request line's level (the Admin API's and the gateway's alike): error for a failure of Nexus's own (a 500
 * it answered, an unexpected cause), warn for another 5xx it answered (an expected condition: the database
 * away, no upstream answer), info otherwise. A provider's error the gateway relayed (`relayed`) is the
 * provider's: info, its status in the line.
 */
export function requestLineLevel(status: number, o: { unexpected: boolean; relayed?: boolean }): 'error' | 'warn' | 'info' {
  if (o.unexpected || (status === 500 && !o.relayed)) return 'error';
  return status >= 500 && !o.relayed ? 'warn' : 'info';
}

/** `logger.warn({ msg, ... })` puts the object under `message`: lift its fields to the top of the line. */
const flattenObjectMessage = winston.format((info) => {
  const message = info.message;
  if (message && typeof message === 'object' && !Array.isArray(message)) {
    delete (info as { message?: unknown }).message;
    Object.assign(info, message);
  }
  return info;
});

interface Repeats {
  level: string;
  msg: string;
  errorCode: string | undefined;
  lines: number;
  suppressed: number;
}

/** The limit as a winston format (false drops the line); `summarize` writes a window's counts. */
function repeatLimiter(limit: RepeatLimit, summarize: (repeats: Repeats) => void) {
  let window = new Map<string, Repeats>();
  let timer: NodeJS.Timeout | undefined;
  const endWindow = () => {
    const ended = window;
    window = new Map();
    for (const repeats of ended.values()) if (repeats.suppressed > 0) summarize(repeats);
    // No timer while nothing is counted: an idle logger holds none.
    if (window.size === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };
  return winston.format((info) => {
    if ((info as Record<symbol, unknown>)[SUMMARY] || (info.level !== 'warn' && info.level !== 'error')) return info;
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- flattenObjectMessage runs first: no object is left here
    const msg = String(info.msg ?? info.message ?? '');
    const errorCode = typeof info.errorCode === 'string' ? info.errorCode : undefined;
    const key = `${info.level}\u0000${msg}\u0000${errorCode ?? ''}`;
    let repeats = window.get(key);
    if (!repeats) {
      repeats = { level: info.level, msg, errorCode, lines: 0, suppressed: 0 };
      window.set(key, repeats);
      if (!timer) {
        timer = setInterval(endWindow, limit.windowMs);
        timer.unref();
      }
    }
    if (repeats.lines >= limit.lines) {
      repeats.suppressed++;
      return false;
    }
    repeats.lines++;
    return info;
  })();
}

/**
 * `meta`: fields every line carries (a worker's id and pid, under NEXUS_WORKERS). `repeatLimit`: how many
 * warn or error lines of one message pass per window (10 per 10 s unless given).
 */
export function createLogger(
  level: string,
  transports?: winston.transport[],
  meta?: Record<string, unknown>,
  repeatLimit: RepeatLimit = DEFAULT_REPEAT_LIMIT,
): Logger {
  let logger: Logger | undefined;
  const limiter = repeatLimiter(repeatLimit, (repeats) =>
    logger?.log(repeats.level, {
      msg: 'log lines suppressed',
      repeated: repeats.msg,
      ...(repeats.errorCode ? { errorCode: repeats.errorCode } : {}),
      suppressed: repeats.suppressed,
      windowMs: repeatLimit.windowMs,
      [SUMMARY]: true,
    }),
  );
  logger = winston.createLogger({
    ...(meta ? { defaultMeta: meta } : {}),
    level: level === 'silent' ? 'error' : level,
    silent: level === 'silent',
    format: winston.format.combine(flattenObjectMessage(), limiter, winston.format.timestamp(), winston.format.json()),
    transports: transports ?? [new winston.transports.Console()],
  });
  return logger;
}
