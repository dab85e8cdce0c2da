/**
 * The compose stack (deploy/compose.yaml) as files: no container runtime runs where Nexus is tested, so what
 * is checked here is that its parts agree with each other and with the image: each replica's data directory
 * (the outage spool) outlives its container, PgBouncer has a healthcheck its image can run, and Prometheus
 * scrapes every replica where it listens.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../support/paths.js';

const read = (file: string) => readFileSync(join(projectRoot, file), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  hostname?: string;
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }> | string[];
}
const compose = parse(read('deploy/compose.yaml'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
/** The services that run the Nexus server: built from the repository's image, without a command of their own. */
const replicas = Object.entries(compose.services).filter(([, s]) => s.image === 'nexus:local' && !s.command);

/** The final stage's `ENV` of the Dockerfile, as the replicas run with it. */
function imageEnv(): Record<string, string> {
  const dockerfile = read('Dockerfile').replace(/\\\n/g, ' ');
  const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const env: Record<string, string> = {};
  for (const [, args] of finalStage.matchAll(/^ENV\s+(.*)$/gm)) {
    for (const pair of args!.trim().split(/\s+/)) env[pair.slice(0, pair.indexOf('='))] = pair.slice(pair.indexOf('=') + 1);
  }
  return env;
}

describe('deploy/compose.yaml', () => {
  it('runs two replicas, each with its data directory in a named volume of its own and a fixed host name', () => {
    const dataDir = imageEnv().NEXUS_DATA_DIR;
    expect(dataDir).toBe('/var/lib/nexus');
    expect(replicas.map(([name]) => name)).toEqual(['nexus-1', 'nexus-2']);
    const volumes = replicas.map(([name, s]) => {
      const mount = (s.volumes ?? []).find((v) => v.split(':')[1] === dataDir);
      expect(mount, `${name} mounts ${dataDir}`).toBeDefined();
      const volume = mount!.split(':')[0]!;
      // A named volume (declared at the top level), not a path on the host.
      expect(Object.keys(compose.volumes), name).toContain(volume);
      return volume;
    });
    expect(new Set(volumes).size).toBe(replicas.length);
    // The spool's files carry the host's name: a recreated container must have the same one to replay them.
    const hostnames = replicas.map(([, s]) => s.hostname);
    for (const hostname of hostnames) expect(hostname).toMatch(/^[a-z0-9-]+$/);
    expect(new Set(hostnames).size).toBe(replicas.length);
  });

  it('gives PgBouncer a healthcheck on its port, which its image can run, and starts the replicas once it passes', () => {
    const pgbouncer = compose.services.pgbouncer!;
    const port = /^listen_port\s*=\s*(\d+)$/m.exec(read('deploy/pgbouncer/pgbouncer.ini'))![1];
    const test = pgbouncer.healthcheck!.test;
    expect(test.slice(0, 2)).toEqual(['CMD', 'pg_isready']);
    expect(test[test.indexOf('-p') + 1]).toBe(port);
    // pg_isready comes with PostgreSQL's client, which Debian's pgbouncer package does not pull in.
    expect(read('deploy/pgbouncer/Dockerfile')).toMatch(/apt-get install[^\n]*\bpostgresql-client\b/);
    for (const [name, s] of replicas)
      expect((s.depends_on as Record<string, { condition: string }>).pgbouncer, name).toEqual({ condition: 'service_healthy' });
  });

  it('runs Prometheus scraping every replica (by its service name, on the compose network) on the port it listens on', () => {
    const prometheus = compose.services.prometheus!;
    expect(prometheus.image).toMatch(/^prom\/prometheus:/);
    expect(prometheus.volumes).toContain('./prometheus.yml:/etc/prometheus/prometheus.yml:ro');
    const config = parse(read('deploy/prometheus.yml')) as {
      scrape_configs: { job_name: string; metrics_path?: string; static_configs: { targets: string[] }[] }[];
    };
    const port = imageEnv().PORT;
    const nexus = config.scrape_configs.find((c) => c.job_name === 'nexus')!;
    expect(nexus.metrics_path ?? '/metrics').toBe('/metrics');
    expect(nexus.static_configs.flatMap((c) => c.targets).sort()).toEqual(replicas.map(([name]) => `${name}:${port}`).sort());
  });
});
