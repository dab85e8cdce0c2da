/**
 * The protocols Nexus meters, by a connection's protocolProfile. A new protocol is a module beside these
 * (its ProtocolTable, protocol.ts) and a row here; PROFILES, read by the domain (connections, prices,
 * routes), the gateway and the tests that hold the contract's ProtocolProfile and the database's check of
 * provider_connections.protocol_profile to it (test/protocols/profiles.test.ts), follows. A new endpoint of a
 * protocol is a module too (its EndpointRows) and a row here: the protocol's entry `withEndpoints(it, rows)`.
 */
import { AppError } from '../errors.js';
import { anthropic } from './anthropic.js';
import { azureOpenai } from './azure-openai.js';
import { bedrock } from './bedrock.js';
import { NOVA_CANVAS_ROWS } from './bedrock-nova-canvas.js';
import { gemini } from './gemini.js';
import { openai } from './openai.js';
import { defineProtocol, type EndpointSpec, type Protocol } from './protocol.js';

/**
 * Endpoints that a module of their own adds to a protocol: their metered paths (matched after the protocol's own, and
 * before its passthrough rows and its checkRequest: a path its table lets through or refuses, such as Bedrock's
 * InvokeModel, is metered for what these rows match) and their specs, by name. The gateway reads them as it reads
 * the protocol's own (protocol.ts, EndpointSpec).
 */
export interface EndpointRows<E extends string = string> {
  metered: readonly (readonly [RegExp, NoInfer<E>])[];
  endpoints: Record<E, EndpointSpec>;
}

/** `protocol` with the endpoints of `added`; an endpoint's name that it already has is a mistake, thrown at load. */
export function withEndpoints(protocol: Protocol, ...added: readonly EndpointRows[]): Protocol {
  const endpoints: Record<string, EndpointSpec> = { ...protocol.endpoints };
  for (const rows of added) {
    for (const name in rows.endpoints) {
      if (Object.hasOwn(endpoints, name)) throw new Error(`The ${protocol.profile} protocol has an endpoint '${name}' already`);
      endpoints[name] = rows.endpoints[name]!;
    }
  }
  return defineProtocol({ ...protocol, metered: [...protocol.metered, ...added.flatMap((rows) => rows.metered)], endpoints });
}

const PROTOCOLS = {
  openai,
  anthropic,
  'azure-openai': azureOpenai,
  gemini,
  bedrock: withEndpoints(bedrock, NOVA_CANVAS_ROWS),
} satisfies Record<string, Protocol>;

/** A provider connection's protocolProfile: the API it speaks. */
export type ProtocolProfile = keyof typeof PROTOCOLS;

/** Every protocolProfile, in the contract's order. */
export const PROFILES: readonly ProtocolProfile[] = Object.freeze(Object.keys(PROTOCOLS) as ProtocolProfile[]);

const ALL: readonly Protocol[] = Object.values(PROTOCOLS);

/** Whether a string is a protocolProfile (an input the contract does not check, a price's scope). */
export const isProtocolProfile = (value: string): value is ProtocolProfile => Object.hasOwn(PROTOCOLS, value);

export function protocolOf(profile: ProtocolProfile): Protocol {
  return PROTOCOLS[profile];
}

/**
 * Every header an inference key may come in, whatever the connection (its protocol is known only once
 * the key is looked up): read in this order by client-request.ts, and never sent to an upstream.
 */
export const CALLER_KEY_HEADERS: readonly string[] = [...new Set(ALL.flatMap((p) => p.callerKeyHeaders))];

/** Every query parameter an inference key may come in (Gemini's `key`), read after the headers and never forwarded. */
export const CALLER_KEY_QUERIES: readonly string[] = [...new Set(ALL.flatMap((p) => (p.callerKeyQuery ? [p.callerKeyQuery] : [])))];

/** The protocols that read some encoded slashes of a path as slashes (slashesInPath): path-safety.ts asks each. */
export const SLASH_READERS: readonly Protocol[] = ALL.filter((p) => p.slashesInPath);

/**
 * The protocol, other than `own`, that meters or governs this method and route, when `own` does neither:
 * a call of one API on a connection of another, refused (409 protocol_mismatch) rather than forwarded
 * unmetered.
 */
export function foreignProtocolOf(own: Protocol, method: string, route: string): Protocol | undefined {
  for (const other of ALL) {
    if (other === own) continue;
    if (other.inspectorFor(method, route) || other.freeEndpointFor(method, route)) return other;
  }
  return undefined;
}

/**
 * The protocol whose error shape a refusal made before the connection is known takes (a wrong key, an
 * unknown connection): the one the path itself belongs to, when every protocol that meters or governs it
 * shares one shape (`v1/messages` is Anthropic's; `v1/models` is OpenAI's and Anthropic's, two shapes:
 * none). Read from the path alone, so it tells a caller nothing about the connection it named.
 */
export function protocolOfPath(method: string, route: string): Protocol | undefined {
  let found: Protocol | undefined;
  for (const protocol of ALL) {
    if (!protocol.inspectorFor(method, route) && !protocol.freeEndpointFor(method, route)) continue;
    if (found && found.errorShape !== protocol.errorShape) return undefined;
    found ??= protocol;
  }
  return found;
}

/** Each field a protocol's secret takes beside apiKey (its SecretFormat), with that protocol. */
const SECRET_FIELDS = new Map(ALL.flatMap((p) => (p.secret ? p.secret.fields.map((field) => [field, p] as const) : [])));

/**
 * The text a connection of `profile` seals: the apiKey itself, or its protocol's secret made of apiKey and the
 * fields it takes (`given`: the request; `current` opens the secret it replaces, when the protocol needs what it
 * kept). Throws 400 naming a field of another protocol's secret, or one its own misses.
 */
export function connectionSecret(profile: ProtocolProfile, apiKey: string, given: object, current?: () => string): string {
  const protocol = PROTOCOLS[profile];
  for (const [field, owner] of SECRET_FIELDS) {
    if (owner !== protocol && (given as Record<string, unknown>)[field] !== undefined) {
      throw new AppError('invalid_parameter', `${field} is for a '${owner.profile}' connection only`, { param: field });
    }
  }
  return protocol.secret ? protocol.secret.seal(apiKey, given, current) : apiKey;
}

/** The part of a connection's sealed secret that its preview shows and the answers' mask looks for: the key, unless its protocol's secret says. */
export function visibleSecret(profile: ProtocolProfile, text: string): string {
  const secret = PROTOCOLS[profile].secret;
  return secret ? secret.visible(text) : text;
}
