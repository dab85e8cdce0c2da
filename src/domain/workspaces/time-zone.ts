import { AppError } from '../../errors.js';

/** The time zone of a workspace that never set one. */
export const DEFAULT_TIME_ZONE = 'UTC';

/** An IANA name's shape (`UTC`, `Europe/Paris`, `America/Argentina/Buenos_Aires`, `Etc/GMT+5`): no bare offsets. */
const IANA_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+){0,2}$/;

/** Refuses a name that is not an IANA time zone the runtime knows, naming the field. */
export function assertTimeZone(name: string, param: string): void {
  if (IANA_NAME.test(name) && name.length <= 64 && knows(name)) return;
  throw new AppError('invalid_parameter', `${param} must be an IANA time zone name such as Europe/Paris; '${name}' is not one`, { param });
}

function knows(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** The zones of UTC's own days under another name (tzdata's links to Etc/UTC and Etc/GMT, and PostgreSQL's `posix/` copies). */
const UTC_NAMES = /^(posix\/)?(Etc\/)?(UTC|UCT|Universal|Zulu|GMT|GMT[+-]?0|Greenwich)$/;
/** tzdata's fixed offsets, `Etc/GMT+5` (UTC-5, POSIX's sign) to `Etc/GMT-14`: one offset throughout, no history. */
const ETC_GMT = /^(posix\/)?Etc\/GMT([+-]\d{1,2})$/;

/** A zone's offset from UTC in hours where it never had another (UTC's names and Etc/GMT±N); undefined for any other zone. */
function fixedOffsetOf(zone: string): number | undefined {
  if (UTC_NAMES.test(zone)) return 0;
  const etc = ETC_GMT.exec(zone);
  return etc ? -Number(etc[2]) : undefined;
}

/**
 * Whether the days of zone `a` are those of zone `b` at every instant: the same name, or two names of one fixed
 * offset (`Etc/UTC` and `UTC`, `Etc/GMT-3` and `Etc/GMT-3`). Other pairs are told apart even where their rules agree
 * today (Europe/Paris and Europe/Berlin differ before 1980).
 */
export function sameDays(a: string, b: string): boolean {
  if (a === b) return true;
  const offset = fixedOffsetOf(a);
  return offset !== undefined && offset === fixedOffsetOf(b);
}

interface LocalDate {
  year: number;
  /** 1 to 12. */
  month: number;
  day: number;
}

/** The calendar date in `zone` at the instant `at`. */
export function localDate(at: Date, zone: string): LocalDate {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone: zone, year: 'numeric', month: 'numeric', day: 'numeric' }).formatToParts(at);
  const part = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  return { year: part('year'), month: part('month'), day: part('day') };
}

/** How far `zone`'s clock is ahead of UTC at the instant `ms`, in milliseconds. */
function offsetAt(ms: number, zone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  }).formatToParts(ms);
  const part = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  const asUtc = Date.UTC(part('year'), part('month') - 1, part('day'), part('hour'), part('minute'), part('second'));
  return asUtc - Math.floor(ms / 1000) * 1000;
}

/**
 * The instant of the local midnight that begins a date in `zone` (month and day may overflow, as Date.UTC's do:
 * month 13 is January of the next year). Taken at the offset of the midnight itself, found in two steps: a
 * guess at the offset of the UTC midnight, then the offset at that guess (a DST change between them moves it).
 */
export function localMidnight(year: number, month: number, day: number, zone: string): Date {
  const wall = Date.UTC(year, month - 1, day);
  const guess = wall - offsetAt(wall, zone);
  return new Date(wall - offsetAt(guess, zone));
}
