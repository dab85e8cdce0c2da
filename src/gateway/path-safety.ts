/**
 * The gateway's URL, checked before anything else: `/providers/{id}/{path}`
 * with a path that cannot climb out of the connection's base path or smuggle
 * another origin. Anything doubtful is refused (400): the upstream never sees it.
 */
import { AppError } from '../errors.js';
import { hasUuidForm } from '../ids.js';
import { SLASH_READERS } from '../protocols/index.js';
import type { ProtocolProfile } from '../protocols/index.js';

export interface GatewayTarget {
  connectionId: string;
  /** The provider path as the client sent it (still percent-encoded), without a leading slash. */
  providerPath: string;
  /**
   * The path an upstream may route it as: percent-decoded, `;parameters` dropped from its
   * segments, no trailing slash. Metering matches this, so `chat/%63ompletions` or
   * `chat/completions;x` cannot pass as an unmetered endpoint.
   */
  route: string;
  /** '' or '?...' exactly as sent. */
  search: string;
  /**
   * The protocol whose rule read encoded slashes of the path as slashes (a Bedrock model ARN's), when one
   * did: the path is safe on its connections only (checkSlashesFor).
   */
  slashesReadBy?: ProtocolProfile;
}

const PREFIX = '/providers/';
const GATEWAY_ROUTE = 'Gateway calls go to /providers/{providerConnectionId}/{providerPath}';
/** The nil UUID: no connection has it. */
const NO_CONNECTION = '00000000-0000-0000-0000-000000000000';
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;
const ENCODED_SEPARATOR = /%(2f|5c)/i;
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;

function unsafe(message: string): AppError {
  return new AppError('unsafe_proxy_request', message, { param: 'providerPath' });
}

function checkDecoded(path: string): void {
  if (CONTROL.test(path)) throw unsafe('The path holds a control character');
  if (path.includes('\\')) throw unsafe('The path holds a backslash');
  if (ENCODED_SEPARATOR.test(path)) throw unsafe('The path holds an encoded slash or backslash');
  const segments = path.split('/');
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    if (s === '.' || s === '..') throw unsafe('The path holds a dot segment');
    if (s === '' && i < segments.length - 1) throw unsafe('The path holds an empty segment');
  }
  if (SCHEME.test(segments[0]!)) throw unsafe('The path is an absolute URL');
}

/**
 * A provider path of plain segments only (letters, digits, `_`, `~`, `-` and dots, none starting with a dot, none
 * empty; no percent-encoding, `;parameters`, colon or backslash): nothing to decode or check, its route is itself
 * without a trailing slash. Every other path goes through routeOfEncoded, which reaches the same route for these.
 */
const PLAIN_PATH = /^[\w~-][\w.~-]*(?:\/[\w~-][\w.~-]*)*\/?$/;

/**
 * The route of a provider path that may be encoded: decoded until stable (at most 3 rounds: double-encoded '..' or
 * '/' are caught too), each decoding checked, `;parameters` dropped from its segments, no trailing slash.
 */
function routeOfEncoded(providerPath: string): { route: string; slashesReadBy: ProtocolProfile | undefined } {
  // A protocol may read some encoded slashes as slashes (Bedrock, a model ARN's): its connections alone take the
  // path so read (checkSlashesFor), once it passes every check below.
  let current = providerPath;
  let slashesReadBy: ProtocolProfile | undefined;
  for (const reader of SLASH_READERS) {
    const read = reader.slashesInPath!(providerPath);
    if (read === undefined) continue;
    current = read;
    slashesReadBy = reader.profile;
    break;
  }
  for (let round = 0; round < 4; round++) {
    checkDecoded(current);
    if (!current.includes('%')) break;
    let decoded: string;
    try {
      decoded = decodeURIComponent(current);
    } catch {
      throw unsafe('The path holds a malformed percent-encoding');
    }
    if (decoded === current) break;
    if (round === 3) throw unsafe('The path is encoded too many times');
    current = decoded;
  }
  const route = current
    .split('/')
    .map((segment) => segment.split(';', 1)[0])
    .join('/')
    .replace(/\/$/, '');
  return { route, slashesReadBy };
}

/** Parses and checks the raw request target (req.originalUrl, not decoded by anyone). */
export function parseGatewayUrl(rawUrl: string): GatewayTarget {
  if (!rawUrl.startsWith('/')) throw unsafe('The request target must be a path');
  if (!rawUrl.startsWith(PREFIX)) throw new AppError('route_not_found', GATEWAY_ROUTE);
  const q = rawUrl.indexOf('?');
  const pathPart = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const search = q === -1 ? '' : rawUrl.slice(q);
  if (CONTROL.test(search)) throw unsafe('The query string holds a control character');
  const rest = pathPart.slice(PREFIX.length);
  const slash = rest.indexOf('/');
  const connectionId = slash === -1 ? rest : rest.slice(0, slash);
  const providerPath = slash === -1 ? '' : rest.slice(slash + 1);
  if (!providerPath) throw new AppError('route_not_found', GATEWAY_ROUTE);
  const { route, slashesReadBy } = PLAIN_PATH.test(providerPath)
    ? { route: providerPath.endsWith('/') ? providerPath.slice(0, -1) : providerPath, slashesReadBy: undefined }
    : routeOfEncoded(providerPath);
  // An id that is not a UUID names no connection: the key is still checked first (401 before 404). One in
  // upper case is the same connection: ids are compared (the auth cache's key) and recorded in lower case.
  const target: GatewayTarget = {
    connectionId: hasUuidForm(connectionId) ? connectionId.toLowerCase() : NO_CONNECTION,
    providerPath,
    route,
    search,
  };
  if (slashesReadBy) target.slashesReadBy = slashesReadBy;
  return target;
}

/** Refuses a path whose encoded slashes only another protocol reads as slashes, on a connection of `profile`. */
export function checkSlashesFor(target: GatewayTarget, profile: ProtocolProfile): void {
  if (target.slashesReadBy && target.slashesReadBy !== profile) throw unsafe('The path holds an encoded slash or backslash');
}
