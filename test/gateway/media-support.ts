/**
 * What the media endpoints' tests share (images, speech, transcription, moderations: docs/modalities.md): the app,
 * the media upstream (test/support/upstreams/media.ts), a tenant on it, and a call's charge as the Admin API and the
 * period show it.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startMediaUpstream, type MediaUpstream } from '../support/upstreams/media.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, invocationByRequestId, periodOf, type Tenant } from './gateway-support.js';
import type { TenantSpec } from '../support/tenant.js';

const KINDS = [
  'audioInputTokens',
  'audioOutputTokens',
  'imageInputTokens',
  'imageOutputTokens',
  'images',
  'imageTier',
  'audioMs',
  'characters',
] as const;
type Kind = (typeof KINDS)[number];

export const MEDIA_KEY = `${SECRET_MARKER}-media-0123456789abcdef`;

export interface MediaRig {
  t: TestApp;
  up: MediaUpstream;
  tenant: Tenant;
  /** Another tenant on the same upstream (`spec` beside the upstream's). */
  tenantWith(spec: Omit<TenantSpec, 'baseUrl' | 'providerKey'>): Promise<Tenant>;
  /**
   * A call's invocation (by the x-nexus-request-id its answer carried): its status, its units, and the kinds beyond
   * text tokens its record carries (only those it has: docs/pricing.md, "Kinds").
   */
  charged(
    requestId: string | null,
    tenant?: Tenant,
  ): Promise<{ status: string; units: bigint; errorCode: string | null | undefined; kinds: Partial<Record<Kind, string>> }>;
  /** The units the tenant's access has consumed in its period. */
  consumed(tenant?: Tenant): Promise<bigint>;
}

/**
 * The app and the media upstream, started before the file's tests and closed after them; the first tenant on the
 * connection's `profile` (units: an input token 1, an output token 2: the default image is 4,160 output tokens, a
 * second 20 input tokens, a character 1); `upstream`: the media upstream's options (its `keepBodies`).
 */
export function mediaRig(spec: Omit<TenantSpec, 'baseUrl' | 'providerKey'> = {}, upstream: { keepBodies?: boolean } = {}): MediaRig {
  const rig = {} as MediaRig;
  beforeAll(async () => {
    rig.t = await startTestApp();
    rig.up = await startMediaUpstream({ apiKey: MEDIA_KEY, ...upstream });
    rig.tenantWith = (other) => createTenant(rig.t, { baseUrl: rig.up.url, providerKey: MEDIA_KEY, quotaUnits: 1_000_000n, ...other });
    rig.tenant = await rig.tenantWith(spec);
    rig.charged = async (requestId, tenant = rig.tenant) => {
      expect(requestId, 'the answer names its request').toBeTruthy();
      const inv = await invocationByRequestId(rig.t, tenant.workspaceId, requestId!);
      const kinds = Object.fromEntries(KINDS.filter((k) => inv[k] != null).map((k) => [k, String(inv[k])]));
      return { status: inv.status, units: BigInt(inv.quotaUnits ?? '0'), errorCode: inv.errorCode, kinds };
    };
    rig.consumed = async (tenant = rig.tenant) => {
      await rig.t.nexus.gateway.drain();
      return (await periodOf(rig.t, tenant.accessId)).consumed;
    };
  }, 60_000);
  afterAll(async () => {
    await rig.t?.close();
    await rig.up?.close();
  });
  return rig;
}
