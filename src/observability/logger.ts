/**
 * winston, one JSON object per line. Nothing secret is passed to it: request
 * lines carry ids, paths without query strings, statuses and durations only.
 */
import winston from 'winston';

export type Logger = winston.Logger;

/** `logger.warn({ msg, ... })` puts the object under `message`: lift its fields to the top of the line. */
const flattenObjectMessage = winston.format((info) => {
  const message = info.message as unknown;
  if (message && typeof message === 'object' && !Array.isArray(message)) {
    delete (info as { message?: unknown }).message;
    Object.assign(info, message);
  }
  return info;
});

/** `meta`: fields every line carries (a worker's id and pid, under NEXUS_WORKERS). */
export function createLogger(level: string, transports?: winston.transport[], meta?: Record<string, unknown>): Logger {
  return winston.createLogger({
    ...(meta ? { defaultMeta: meta } : {}),
    level: level === 'silent' ? 'error' : level,
    silent: level === 'silent',
    format: winston.format.combine(flattenObjectMessage(), winston.format.timestamp(), winston.format.json()),
    transports: transports ?? [new winston.transports.Console()],
  });
}
