/**
 * winston, one JSON object per line. Nothing secret is passed to it: request
 * lines carry ids, paths without query strings, statuses and durations only.
 */
import winston from 'winston';

export type Logger = winston.Logger;

export function createLogger(level: string, transports?: winston.transport[]): Logger {
  return winston.createLogger({
    level: level === 'silent' ? 'error' : level,
    silent: level === 'silent',
    format: winston.format.combine(winston.format.timestamp(), winston.format.json()),
    transports: transports ?? [new winston.transports.Console()],
  });
}
