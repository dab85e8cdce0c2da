/** Which environment turns traces on, and where they go (src/config.ts). */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { TEST_ENCRYPTION_KEY } from '../support/keys.js';

const load = (env: Record<string, string>) => loadConfig({ NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, ...env }, () => {});

describe('OTEL_* configuration', () => {
  it('leaves traces off unless an exporter or an endpoint is named', () => {
    expect(load({}).tracing).toBeUndefined();
    expect(load({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing).toBeUndefined();
  });

  it('sends to the endpoint with the traces path, or to the traces endpoint as given', () => {
    expect(load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toMatchObject({
      exporter: 'otlp',
      endpoint: 'http://collector:4318/v1/traces',
      serviceName: 'nexus',
      sampler: 'parentbased_always_on',
    });
    expect(load({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector/in' }).tracing).toMatchObject({
      endpoint: 'https://collector/in',
    });
    expect(load({ OTEL_TRACES_EXPORTER: 'otlp' }).tracing).toMatchObject({ endpoint: 'http://localhost:4318/v1/traces' });
    expect(load({ OTEL_TRACES_EXPORTER: 'console' }).tracing).toMatchObject({ exporter: 'console' });
  });

  it('reads the headers, the service name and the sampler', () => {
    const tracing = load({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant = one',
      OTEL_SERVICE_NAME: 'gw-eu',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    }).tracing!;
    expect(tracing.headers).toEqual({ authorization: 'Bearer abc', 'x-tenant': 'one' });
    expect(tracing).toMatchObject({ serviceName: 'gw-eu', sampler: 'parentbased_traceidratio', samplerRatio: 0.25 });
    expect(Object.isFrozen(tracing)).toBe(true);
  });

  it.each([
    [{ OTEL_TRACES_EXPORTER: 'jaeger' }, /OTEL_TRACES_EXPORTER must be one of otlp, console, none/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT must be an http\(s\) URL/],
    [{ OTEL_EXPORTER_OTLP_HEADERS: 'novalue' }, /OTEL_EXPORTER_OTLP_HEADERS must be a list of name=value/],
    [{ OTEL_TRACES_SAMPLER_ARG: '2' }, /OTEL_TRACES_SAMPLER_ARG must be <= 1/],
  ])('refuses %o', (env, message) => {
    expect(() => load(env)).toThrow(ConfigError);
    expect(() => load(env)).toThrow(message);
  });
});
