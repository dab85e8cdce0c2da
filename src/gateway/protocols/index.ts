/**
 * The protocols the gateway meters, by a connection's protocolProfile. A new protocol is a module
 * beside these (its ProtocolTable, protocol.ts) and a row here.
 */
import { anthropic } from './anthropic.js';
import { bedrock } from './bedrock.js';
import { openai } from './openai.js';
import type { Protocol, ProtocolProfile } from './protocol.js';

const PROTOCOLS: Record<ProtocolProfile, Protocol> = { openai, anthropic, bedrock };

export function protocolOf(profile: ProtocolProfile): Protocol {
  return PROTOCOLS[profile];
}
