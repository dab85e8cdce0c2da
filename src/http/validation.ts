/**
 * A request the contract refuses, in words: ajv's first error becomes the Error body's message, its code (the
 * failing schema's `x-error-code`, else invalid_parameter) and the field at fault (`param`). And the date-time
 * format the contract's instants are checked against.
 */
import type { ErrorObject } from 'ajv';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { AppError, errorCodes, type ErrorCode } from '../errors.js';

/** ajv's error -> the request field at fault, as a caller names it ('name', 'limit', 'metadata.tier'). */
function paramOf(e: ErrorObject): string | null {
  const segments = e.instancePath.split('/').filter(Boolean).slice(1);
  const p = e.params as { missingProperty?: string; additionalProperty?: string };
  if (p.missingProperty) segments.push(p.missingProperty);
  if (p.additionalProperty) segments.push(p.additionalProperty);
  return segments.length ? segments.join('.') : null;
}

/** How a format is named in an error message. */
const FORMATS: Record<string, string> = {
  'date-time': 'an ISO 8601 date-time with a time zone, in the years 0001-9999 UTC (2026-01-31T12:00:00Z)',
  uuid: 'a UUID',
  email: 'an email address',
  uri: 'an absolute URL',
};

const FIRST_INSTANT = Date.parse('0001-01-01T00:00:00Z');
const LAST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * RFC 3339 (ajv-formats' check) and, once in UTC, within the years 0001-9999: an
 * instant outside them would be written back as '+010000-...', which is no
 * RFC 3339 date-time.
 */
const isRfc3339 = (fullFormats['date-time'] as { validate: (value: string) => boolean }).validate;

export function isDateTime(value: string): boolean {
  if (!isRfc3339(value)) return false;
  const at = Date.parse(value);
  return at >= FIRST_INSTANT && at <= LAST_INSTANT;
}

/** What the contract's patterns ask for, in words. */
const PATTERNS: Record<string, string> = {
  '\\S': 'must not be blank',
  '^(0|[1-9][0-9]{0,18})$': 'must be a whole number from 0 to 9223372036854775807 as a decimal string, such as "1000"',
  '^[a-z0-9][a-z0-9_.-]*$': "must start with a lowercase letter or digit and hold only lowercase letters, digits, '_', '.' and '-'",
  '^[\\x21-\\x7E]+$': 'must be printable ASCII without spaces',
  '^[^\\s?\\[\\]{}\\\\]+$': "must be a model name or a glob whose only wildcard is '*', without whitespace or any of ? [ ] { } \\",
  '^[Hh][Tt][Tt][Pp][Ss]?://[^/?#\\s]+[^\\s]*$':
    'must be an http or https URL without spaces, such as "https://app.example.com/billing/done"',
};

const TYPES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'an array',
  null: 'null',
};

function typeMessage(type: unknown): string {
  const types = String(type).split(',');
  return `must be ${types.map((t) => TYPES[t] ?? t).join(' or ')}`;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

export function validationError(errors: ErrorObject[] | null | undefined): AppError {
  const first = errors?.[0];
  if (!first) return new AppError('invalid_request', 'The request is invalid');
  if (first.keyword === 'parse') return new AppError('invalid_json', 'The request body is not valid JSON');
  if (first.keyword === 'required' && (first.params as { missingProperty?: string }).missingProperty === 'requestBody') {
    return new AppError('invalid_parameter', 'The request body is required (JSON)');
  }
  const param = paramOf(first);
  const p = first.params as {
    additionalProperty?: string;
    allowedValues?: unknown[];
    pattern?: string;
    format?: string;
    type?: unknown;
    limit?: number;
  };
  const subject = param ?? 'The request body';
  let message: string;
  if (first.keyword === 'additionalProperties') {
    message = `Unknown ${first.instancePath.startsWith('/query') ? 'query parameter' : 'field'} '${param}'`;
  } else if (first.keyword === 'required') message = `${subject} is required`;
  else if (first.keyword === 'enum' && p.allowedValues) message = `${subject} must be one of ${p.allowedValues.join(', ')}`;
  else if (first.keyword === 'format' && p.format && FORMATS[p.format]) message = `${subject} must be ${FORMATS[p.format]}`;
  else if (first.keyword === 'pattern' && p.pattern && PATTERNS[p.pattern]) message = `${subject} ${PATTERNS[p.pattern]}`;
  else if (first.keyword === 'type') message = `${subject} ${typeMessage(p.type)}`;
  else if (first.keyword === 'minLength') message = `${subject} must be at least ${plural(p.limit!, 'character')} long`;
  else if (first.keyword === 'maxLength') message = `${subject} must be at most ${plural(p.limit!, 'character')} long`;
  else if (first.keyword === 'maxProperties') message = `${subject} must have at most ${plural(p.limit!, 'field')}`;
  else if (first.keyword === 'minProperties' && !param) message = 'The request body must name at least one field to change';
  else message = `${subject} ${first.message ?? 'is invalid'}`;
  return new AppError(codeOf(first), message, param ? { param } : {});
}

/** The code of a refusal: the failing schema's own (`x-error-code` in the contract, for a cause that has one), else invalid_parameter. */
function codeOf(e: ErrorObject): ErrorCode {
  const own = (e.parentSchema as { 'x-error-code'?: unknown } | undefined)?.['x-error-code'];
  return errorCodes.includes(own as ErrorCode) ? (own as ErrorCode) : 'invalid_parameter';
}
