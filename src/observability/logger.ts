/**
 * winston, one JSON object per line. Nothing secret is passed to it: request
 * lines carry ids, paths without query strings, statuses and durations only.
 *
 * Warn and error lines are rate-limited by what they say: past `lines` lines of one message (and error
 * code) in a window of `windowMs`, the others are dropped, and at the window's end one line says how many
 * were (`log lines suppressed`). A database outage at hundreds of calls a second then writes a few lines a
 * window, not one per call. Info and debug lines (the request log) are never dropped.
 *
 * A line of plain fields at info or debug (the gateway's request line, one per call) is written by `logLine`
 * straight to the console, as the bytes winston would write there, when the console is the logger's one transport:
 * winston's way (its object streams, a format chain that configures safe-stable-stringify anew for each line, and
 * the console transport's setImmediate for its 'logged' event) cost a call about 20-30 µs of CPU, the direct
 * write 4-5.
 */
import { EOL } from 'node:os';
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
  const onConsole = transports ? undefined : new winston.transports.Console();
  logger = winston.createLogger({
    ...(meta ? { defaultMeta: meta } : {}),
    level: level === 'silent' ? 'error' : level,
    silent: level === 'silent',
    format: winston.format.combine(flattenObjectMessage(), limiter, winston.format.timestamp(), winston.format.json()),
    transports: transports ?? [onConsole!],
  });
  if (onConsole) consoles.set(logger, onConsole);
  return logger;
}

/** The loggers createLogger made with the console as their transport, and that transport. */
const consoles = new WeakMap<Logger, winston.transport>();

/** What JSON must escape in a string (safe-stable-stringify's test: a string without any is written as it is). */
// eslint-disable-next-line no-control-regex -- JSON escapes the control characters: they are what this matches
const NEEDS_ESCAPE = /[\u0000-\u001f\u0022\u005c\ud800-\udfff]/;

const quoted = (text: string) => (text.length < 5000 && !NEEDS_ESCAPE.test(text) ? `"${text}"` : JSON.stringify(text));

/** A line's keys in the order they come, their sorted order, and each sorted key as JSON writes it before its value. */
interface KeyOrder {
  keys: string[];
  sorted: string[];
  prefixes: string[];
}

/** The key orders of the lines written lately (a request line has one of a few). */
const orders: KeyOrder[] = [];

/** The sorted order of `keys`, made once per order of keys (keys compared as the same strings: property names are). */
function keyOrder(keys: string[]): KeyOrder {
  for (const order of orders) {
    const known = order.keys;
    if (known.length !== keys.length) continue;
    let same = true;
    for (let i = 0; i < keys.length && same; i++) same = known[i] === keys[i];
    if (same) return order;
  }
  const sorted = [...keys].sort();
  const order = { keys, sorted, prefixes: sorted.map((key) => `${quoted(key)}:`) };
  if (orders.length >= 16) orders.shift();
  orders.push(order);
  return order;
}

/**
 * The line winston's format (timestamp, then json: safe-stable-stringify, its keys sorted, a bigint as a string)
 * makes of `fields` at `level` with the logger's `meta`, `fields` completed as winston completes its line (its
 * level, the meta, a timestamp); undefined when a field is not a string, number, boolean, bigint, null or
 * undefined (an object: the line is left to winston).
 */
export function plainLine(level: string, fields: Record<string, unknown>, meta?: Record<string, unknown>): string | undefined {
  fields.level = level;
  if (meta) Object.assign(fields, meta);
  if (!fields.timestamp) fields.timestamp = new Date().toISOString();
  const { sorted, prefixes } = keyOrder(Object.keys(fields));
  let line = '';
  let first = true;
  for (let i = 0; i < sorted.length; i++) {
    const value = fields[sorted[i]!];
    let text: string;
    if (typeof value === 'string') text = quoted(value);
    else if (typeof value === 'number') text = Number.isFinite(value) ? String(value) : 'null';
    else if (value === null) text = 'null';
    else if (typeof value === 'boolean') text = value ? 'true' : 'false';
    else if (typeof value === 'bigint') text = `"${value}"`;
    else if (value === undefined) continue;
    else return undefined;
    line += (first ? '{' : ',') + prefixes[i]! + text;
    first = false;
  }
  return first ? '{}' : `${line}}`;
}

/**
 * `logger.log(level, fields)`; a line of plain fields at info or debug from a logger whose one transport is the
 * console goes to the console directly, where winston's console transport writes it (plainLine's bytes).
 */
export function logLine(logger: Logger, level: 'error' | 'warn' | 'info' | 'debug', fields: Record<string, unknown>): void {
  const onConsole = (level === 'info' || level === 'debug') && !logger.silent ? consoles.get(logger) : undefined;
  if (onConsole && logger.isLevelEnabled(level)) {
    const transports = logger.transports;
    const line = transports.length === 1 && transports[0] === onConsole ? plainLine(level, fields, logger.defaultMeta) : undefined;
    if (line !== undefined) {
      const out = (console as { _stdout?: NodeJS.WritableStream })._stdout;
      if (out) out.write(line + EOL);
      else console.log(line);
      return;
    }
  }
  logger.log(level, fields);
}
